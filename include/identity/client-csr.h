/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's client identity as crypto (docs/contract.md §9.6): the private key generated on the node, the
 * PKCS#10 request for it (CN gardener.cloud:node-agent:machine:<machine>, O gardener.cloud:node-agents),
 * the CSR object's name and body, and what the issued certificate says (validity, does it belong to the
 * key, when to renew it).
 *
 * Key type: EC P-256 (ECDSA). Upstream gardener-node-agent (keyutil.MakeEllipticPrivateKeyPEM) and
 * kubelet's TLS bootstrap use it too, so the signer and the approver see what they already see from GNA;
 * and generating it takes microseconds, where RSA-2048 prime generation can take a noticeable fraction of
 * a second on a small node — on the one event loop that must not block.
 *
 * Pure: OpenSSL in memory only, no files, no logging. A ClientKey owns its EVP_PKEY; PEM buffers holding a
 * private key are handed out as owned strings the caller must release with erase_and_free(). Nothing here
 * ever puts key, certificate or request bytes into an error message. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define CLIENT_CN_PREFIX "gardener.cloud:node-agent:machine:"
#define CLIENT_ORGANIZATION "gardener.cloud:node-agents"
#define CLIENT_CSR_NAME_PREFIX "node-agent-csr-"
#define CLIENT_CSR_SIGNER "kubernetes.io/kube-apiserver-client"
/* What upstream requests (720 h); the signer may issue a shorter one. */
#define CLIENT_CERT_EXPIRATION_SECONDS (720U * 3600U)
#define CLIENT_PEM_MAX (64U * 1024U)

typedef struct ClientKey ClientKey;

int client_key_generate(ClientKey **ret) _warn_unused_result_;
/* -EINVAL if `pem` holds no private key (OpenSSL's reason is not passed on: it could quote bytes). */
int client_key_from_pem(const char *pem, size_t size, ClientKey **ret) _warn_unused_result_;
ClientKey *client_key_free(ClientKey *k);
DEFINE_CLEANUP_FUNC(ClientKey, client_key_free);

/* PKCS#8 PEM of the private key; free with erase_and_free(). */
int client_key_to_pem(const ClientKey *k, char **ret, size_t *ret_size) _warn_unused_result_;

/* Overwrites `size` bytes, then frees. For buffers that held key material. */
void erase_and_free(void *p, size_t size);

/* A machine name usable in a CN and in a file: 1–253 characters of [a-z0-9.-], starting and ending
 * alphanumeric (a DNS-1123 subdomain, what a Machine or Node name is). */
bool client_machine_name_valid(const char *name);

/* "gardener.cloud:node-agent:machine:<machine>"; NULL on ENOMEM. */
char *client_common_name(const char *machine);

/* The PEM PKCS#10 request, signed with the key (SHA-256). -EINVAL for an invalid machine name. */
int client_csr_build(const ClientKey *k, const char *machine, char **ret_pem,
                     size_t *ret_size) _warn_unused_result_;

/* The CSR object's name as upstream computes it (certificatesigningrequest.ComputeDigestedName):
 * prefix + base64url(SHA-512/256 over the '|'-terminated base64url of the public key DER, the CN, the
 * O and each usage). Deterministic for one key, so a retried create meets its own CSR (409). */
int client_csr_name(const ClientKey *k, const char *machine, char **ret) _warn_unused_result_;

/* The certificates.k8s.io/v1 CertificateSigningRequest to POST: name, request, signer, usages
 * (digital signature, key encipherment, client auth — upstream's set), expirationSeconds. */
json_t *client_csr_object(const char *name, const char *csr_pem, size_t csr_size,
                          unsigned expiration_seconds);

typedef struct ClientCertInfo {
        uint64_t not_before_usec; /* CLOCK_REALTIME */
        uint64_t not_after_usec;  /* CLOCK_REALTIME */
        bool is_client_auth;      /* extendedKeyUsage clientAuth present */
} ClientCertInfo;

/* Decodes the first certificate of a PEM buffer. With `k`, -EKEYREJECTED unless the certificate's public
 * key is k's. -EINVAL if there is no parseable certificate. */
int client_cert_info(const char *pem, size_t size, const ClientKey *k,
                     ClientCertInfo *ret) _warn_unused_result_;

/* When to renew: not_before + (70 % + random 0–20 %) of the lifetime (docs/contract.md §9.6); `random` is
 * any uniformly distributed 64-bit value (passed in so the choice is testable). */
uint64_t client_cert_renew_at(const ClientCertInfo *info, uint64_t random);
