# syntax=docker/dockerfile:1
# authsvc image: a static binary on distroless, running as non-root.
#   docker build -t authsvc .
#   docker run -d -p 8080:8080 -v authsvc-data:/data authsvc
# The first start creates /data/users.json with the admin user "admin" and
# prints its password once: docker logs <container>. Manage users with e.g.
#   docker exec -i <container> /authsvc user add --users /data/users.json alice
# A bind-mounted /data must be writable by uid 65532.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /authsvc . \
    && mkdir /data

FROM gcr.io/distroless/static:nonroot
COPY --from=build /authsvc /authsvc
# An empty /data owned by the runtime user, so a new volume inherits it.
COPY --from=build --chown=65532:65532 /data /data
USER 65532:65532
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/authsvc"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--users", "/data/users.json"]
