/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Registry authentication as data: parsing WWW-Authenticate challenges (Bearer and Basic, RFC 7235
 * syntax), building the token-service URL of the distribution token protocol, decoding its answer,
 * and finding credentials for a registry/repository in a docker/containers auth.json. Pure: the
 * caller reads files and performs requests; no I/O, does not log. Limits: a challenge header is at
 * most REGISTRY_CHALLENGE_MAX bytes, a token at most REGISTRY_TOKEN_MAX, an auth.json at most
 * REGISTRY_AUTH_FILE_MAX. */

#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define REGISTRY_CHALLENGE_MAX 4096U
#define REGISTRY_TOKEN_MAX (64U * 1024U)
#define REGISTRY_AUTH_FILE_MAX (1024U * 1024U)

typedef enum RegistryAuthScheme {
        REGISTRY_AUTH_BASIC,
        REGISTRY_AUTH_BEARER,
        _REGISTRY_AUTH_SCHEME_MAX,
        _REGISTRY_AUTH_SCHEME_INVALID = -EINVAL,
} RegistryAuthScheme;

typedef struct RegistryChallenge {
        RegistryAuthScheme scheme;
        char *realm;   /* owned; Bearer: the token service URL */
        char *service; /* owned; may be NULL */
        char *scope;   /* owned; may be NULL */
} RegistryChallenge;

/* Parses a WWW-Authenticate value. With several challenges in one header, Bearer is preferred.
 * -EPROTONOSUPPORT when only unknown schemes are offered, -EBADMSG when malformed (also a Bearer
 * challenge without realm). */
int registry_challenge_parse(const char *header, RegistryChallenge **ret) _warn_unused_result_;
RegistryChallenge *registry_challenge_free(RegistryChallenge *c);
DEFINE_CLEANUP_FUNC(RegistryChallenge, registry_challenge_free);

/* "<realm>?service=...&scope=..." with every value percent-encoded. `default_scope` is used when the
 * challenge names none ("repository:<repo>:pull"). -EINVAL if the realm is not an http(s) URL. */
int registry_challenge_token_url(const RegistryChallenge *c, const char *default_scope,
                                 char **ret) _warn_unused_result_;

/* Decodes the token service's JSON answer: "token" (or "access_token"), "expires_in" seconds
 * (default 60, as the distribution spec says). The token must be printable ASCII without spaces. */
int registry_token_parse(const void *data, size_t size, char **ret_token,
                         uint64_t *ret_expires_in_usec) _warn_unused_result_;

typedef struct RegistryCredentials {
        char *username; /* owned */
        char *password; /* owned */
} RegistryCredentials;

RegistryCredentials *registry_credentials_free(RegistryCredentials *c);
DEFINE_CLEANUP_FUNC(RegistryCredentials, registry_credentials_free);

/* Looks up credentials for `registry` (host[:port]) and `repository` in auth.json content, following
 * containers-auth.json(5): keys "host/ns/repo" beat "host/ns" beat "host"; legacy keys with a scheme
 * or a /v1/, /v2/ suffix match the host only; index.docker.io means docker.io. Each entry carries
 * "auth" (base64 of "user:password") or "username" + "password". -ENOENT when nothing matches,
 * -EBADMSG when the file or the matching entry is malformed. */
int registry_auth_file_lookup(const void *data, size_t size, const char *registry, const char *repository,
                              RegistryCredentials **ret) _warn_unused_result_;

/* "Basic <base64(user:password)>" value for an Authorization header. */
int registry_credentials_basic_header(const RegistryCredentials *c, char **ret) _warn_unused_result_;
