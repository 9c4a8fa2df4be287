# stoker's images, as distroless's nonroot user by number (65532:65532, so
# that Kubernetes can check runAsNonRoot without a runAsUser), no shell:
#   the default (last) stage: the static binary of `make static` on
#     distroless/static, for workers (and anything without a GPU);
#   --target gpuhost: the binary of `make gpuhost` on distroless/cc (glibc),
#     for the coordinator beside the trainer: the same but able to load the
#     driver's libnvidia-ml.so.1, which the NVIDIA container toolkit mounts,
#     so that the GPU monitor reads the trainer's GPUs.
# Not built in this repository's CI (no image registry there): CI builds the
# same binaries with the same make targets and runs each alone in an empty
# root, the gpuhost one with glibc beside it (cmd/stoker/static_linux_test.go).
#   docker build -t registry.example.com/stoker:latest .
#   docker build --target gpuhost -t registry.example.com/stoker:gpuhost .

FROM golang:1.26.8-bookworm AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libjpeg62-turbo-dev libpng-dev libwebp-dev make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV GOTOOLCHAIN=local
RUN make static STATIC_BIN=/out/stoker && make gpuhost GPUHOST_BIN=/out/stoker-gpuhost

FROM gcr.io/distroless/cc-debian12:nonroot AS gpuhost
COPY --from=build /out/stoker-gpuhost /stoker
USER 65532:65532
EXPOSE 7070 9090
ENTRYPOINT ["/stoker"]
CMD ["serve", "--listen=:7070", "--metrics=:9090"]

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stoker /stoker
USER 65532:65532
EXPOSE 7070 9090
ENTRYPOINT ["/stoker"]
CMD ["serve", "--listen=:7070", "--metrics=:9090"]
