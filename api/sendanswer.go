package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// answerAccepted writes a send's 202 as c.JSON(http.StatusAccepted, r)
// writes it, byte for byte, without reflection: encoding/json's encoder
// for the struct costs more than the rest of the answer. With ?pretty (or
// Echo in debug mode), which indent it, c.JSON writes it.
func answerAccepted(c echo.Context, r sendResponse) error {
	if c.Echo().Debug || c.Request().URL.RawQuery != "" {
		if _, pretty := c.QueryParams()["pretty"]; c.Echo().Debug || pretty {
			return c.JSON(http.StatusAccepted, r)
		}
	}
	return c.JSONBlob(http.StatusAccepted, appendSendResponse(make([]byte, 0, 160), r))
}

// appendSendResponse is what json.NewEncoder(w).Encode(r) writes, its
// newline included.
func appendSendResponse(b []byte, r sendResponse) []byte {
	b = appendJSONString(append(b, `{"id":`...), r.ID)
	b = appendJSONString(append(b, `,"verification_id":`...), r.VerificationID)
	b = appendJSONString(append(b, `,"phone":`...), r.Phone)
	b = appendJSONString(append(b, `,"status":`...), r.Status)
	b = strconv.AppendInt(append(b, `,"expires_in":`...), r.ExpiresIn, 10)
	return append(b, "}\n"...)
}

// appendJSONString appends s as encoding/json writes a string: as it is
// when every byte is printable ASCII that it does not escape, else as
// json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
