package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"smsgw/api/openapi"
)

// handleOpenAPI serves the contract; the tests hold every response to it.
func (s *Server) handleOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.JSON)
}
