package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"smsgw/otp"
)

type verifyRequest struct {
	Phone  string `json:"phone"`
	Code   string `json:"code"`
	Region string `json:"region"`
	// ClientIP is the end user's address, from a backend allowed to send it.
	ClientIP string `json:"client_ip"`
}

func (r verifyRequest) validate() error {
	if r.Phone == "" {
		return otp.Errorf(otp.EInvalidRequest, "phone is required")
	}
	if r.Code == "" {
		return otp.Errorf(otp.EInvalidRequest, "code is required")
	}
	return checkRegion(r.Region)
}

type verifyResponse struct {
	Status string `json:"status"`
	Phone  string `json:"phone"`
}

func (s *Server) handleVerify(c echo.Context) error {
	ctx := c.Request().Context()
	ev := requestEvent(c, otp.KindVerify)

	var req verifyRequest
	err := readRequest(c, &ev, &req, &req.ClientIP)
	if err := s.refuseMalformed(ev, err); err != nil {
		return err
	}

	res, err := s.Service.Verify(ctx, otp.VerifyRequest{
		Ticket: ev.ID, Phone: req.Phone, Region: req.Region, Code: req.Code, ClientIP: ev.ClientIP,
	})
	ev.Phone, ev.Reason = res.Phone.E164, res.Reason
	setOutcome(&ev, err, otp.OutcomeApproved)
	s.recordChecked(ctx, res, err, ev)
	if rerr := s.answered(ctx, ev, func() string {
		return s.Service.AuditSubject(res.Decision, nil, res.Phone, ev.ClientIP)
	}); rerr != nil {
		return rerr
	}
	if res.Limited {
		setLimitHeaders(c.Response().Header(), res.Decision)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, verifyResponse{Status: "approved", Phone: res.Phone.E164})
}
