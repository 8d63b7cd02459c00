package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

// maxBody is the largest request body accepted (SPEC: 16 KiB).
const maxBody = 16 << 10

// readRequest decodes an end user's request into req and checks its shape,
// then takes the user's address from *clientIP (a field of req) when the
// caller may forward one. Its error is what refuseMalformed answers and
// audits.
func readRequest(c echo.Context, ev *otp.AuditEvent, req interface{ validate() error }, clientIP *string) error {
	body, err := readJSON(c.Request())
	if err != nil {
		return err
	}
	return checkRequest(c, body, ev, req, clientIP)
}

// checkRequest is readRequest's second half, over a body already read.
func checkRequest(c echo.Context, body []byte, ev *otp.AuditEvent, req interface{ validate() error }, clientIP *string) error {
	if err := decodeBody(body, req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	var err error
	ev.ClientIP, err = forwardedClient(c, *clientIP, ev.ClientIP)
	return err
}

// readJSON reads a request's JSON body: the media type must be JSON, the
// body at most maxBody bytes (decodeBody then reads it strictly).
func readJSON(r *http.Request) ([]byte, error) {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if r.ContentLength > maxBody {
		return nil, otp.Errorf(otp.ERequestTooLarge, "request body is larger than %d bytes", maxBody)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, &otp.Error{Code: otp.EInvalidRequest, Message: "could not read the request body", Err: err}
	}
	if len(body) > maxBody {
		return nil, otp.Errorf(otp.ERequestTooLarge, "request body is larger than %d bytes", maxBody)
	}
	return body, nil
}

// readBody reads at most maxBody+1 bytes of the body: into a slice of its
// Content-Length when it has one (no growing from 512 bytes for a body of
// 30), else as it comes.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= maxBody {
		body := make([]byte, n)
		_, err := io.ReadFull(r.Body, body)
		return body, err
	}
	return io.ReadAll(io.LimitReader(r.Body, maxBody+1))
}

// decodeBody reads a JSON object body into dst strictly: a single object
// of known fields with the right types and nothing after it. It is apart
// from readJSON for fuzzing and for bodies read once (decodeSend).
func decodeBody(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return otp.Errorf(otp.EInvalidRequest, "request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return &otp.Error{Code: otp.EInvalidRequest, Message: jsonProblem(err), Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return otp.Errorf(otp.EInvalidRequest, "request body holds more than one JSON value")
	}
	return nil
}

func checkContentType(ct string) error {
	if ct == "application/json" {
		return nil // nearly every request: no parsing
	}
	if ct == "" {
		return otp.Errorf(otp.EUnsupportedMediaType, "Content-Type must be application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return otp.Errorf(otp.EUnsupportedMediaType, "Content-Type must be application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return otp.Errorf(otp.EUnsupportedMediaType, "the only accepted charset is utf-8")
	}
	return nil
}

// jsonProblem says what is wrong with a body in terms a frontend developer
// can act on, without echoing the body back.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("request body is not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "request body must be a JSON object"
		}
		return fmt.Sprintf("%s must be a %s", typ.Field, jsonKind(typ.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "request body is truncated JSON"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	default:
		return "request body is not valid JSON"
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "string"
	case "bool":
		return "boolean"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	default:
		return "number"
	}
}
