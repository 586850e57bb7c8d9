# syntax=docker/dockerfile:1
# Static konglet binary on a distroless, non-root base. `make image-oci` builds
# the same image without a Docker engine (test/tools/image: same user,
# entrypoint, command and labels, on an empty base; its test compares them).
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd cmd
COPY informers informers
COPY proxy proxy
COPY sync sync
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /konglet ./cmd/konglet

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/konglet/konglet" \
      org.opencontainers.image.title="konglet"
COPY --from=build /konglet /konglet
USER 65532:65532
ENTRYPOINT ["/konglet"]
CMD ["run"]
