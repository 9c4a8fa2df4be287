# stoker's image: the static binary of `make static` on distroless, as the
# nonroot user, no shell. Not built in this repository's CI (no image
# registry there): CI builds the same binary with the same `make static`
# and runs it alone in an empty root as uid 65532
# (cmd/stoker/static_linux_test.go).
#   docker build -t registry.example.com/stoker:latest .

FROM golang:1.26.8-bookworm AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libjpeg62-turbo-dev make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV GOTOOLCHAIN=local
RUN make static STATIC_BIN=/out/stoker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stoker /stoker
USER nonroot:nonroot
EXPOSE 7070 9090
ENTRYPOINT ["/stoker"]
CMD ["serve", "--listen=:7070", "--metrics=:9090"]
