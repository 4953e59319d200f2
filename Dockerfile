# syntax=docker/dockerfile:1
# outerloop: one binary, run as `outerloop serve | scheduler | worker` (see docker-compose.yml).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/outerloop ./cmd/outerloop

# The runtime image keeps the Go toolchain and git on purpose: workers check out template repos
# into worktrees and run done checks such as `go test -json ./...` inside them. bubblewrap is the
# sandbox every command an item runs starts in (docs/containers.md says what the container
# needs for it; `docker compose run --rm worker validate` says whether it works there).
FROM golang:1.26-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tini bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 outerloop \
 && useradd --create-home --uid 10001 --gid 10001 outerloop \
 && mkdir -p /var/lib/outerloop && chown outerloop:outerloop /var/lib/outerloop
COPY --from=build /out/outerloop /usr/local/bin/outerloop
# outerloop's own source: the repo of the example "self-check" template in deploy/outerloop.yaml.
COPY --from=build --chown=outerloop /src /srv/outerloop
# Every process of the image runs as the user outerloop, never root (a worker as root says so
# at start, docs/containers.md): numeric, as the worker's `user:` in docker-compose.yml, so that
# Kubernetes' runAsNonRoot can check it.
USER 10001:10001
WORKDIR /var/lib/outerloop
ENV GOPATH=/home/outerloop/go GOCACHE=/home/outerloop/.cache/go-build
# tini forwards SIGTERM so workers checkpoint and yield before they stop.
ENTRYPOINT ["/usr/bin/tini", "--", "outerloop"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
