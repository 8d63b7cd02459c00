# Build: docker build -t smsgw .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smsgw ./cmd/smsgw \
 && mkdir -p /out/var/lib/smsgw/spool

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/smsgw /usr/local/bin/smsgw
# The audit spool ("spool" in config.toml, relative to here): mount a volume.
COPY --from=build --chown=nonroot:nonroot /out/var/lib/smsgw /var/lib/smsgw
WORKDIR /var/lib/smsgw
COPY config.toml /etc/smsgw/config.toml
ENV SMSGW_CONFIG=/etc/smsgw/config.toml \
    SMSGW_LISTEN=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/smsgw"]
CMD ["serve"]
