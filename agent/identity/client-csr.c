/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>

#include "identity/client-csr.h"
#include "util/base64.h"

struct ClientKey {
        EVP_PKEY *pkey; /* owned */
};

/* Upstream's usages, in upstream's order (they are part of the digested name). */
static const char *const csr_usages[] = { "digital signature", "key encipherment", "client auth" };

static void bio_freep(BIO **b) {
        if (*b)
                BIO_free(*b);
}

void erase_and_free(void *p, size_t size) {
        if (!p)
                return;
        OPENSSL_cleanse(p, size);
        free(p);
}

static int key_wrap(EVP_PKEY *pkey, ClientKey **ret) {
        ClientKey *k = calloc(1, sizeof(*k));

        if (!k) {
                EVP_PKEY_free(pkey);
                return -ENOMEM;
        }
        k->pkey = pkey;
        *ret = k;
        return 0;
}

int client_key_generate(ClientKey **ret) {
        EVP_PKEY *pkey;

        assert(ret);

        pkey = EVP_EC_gen("P-256");
        if (!pkey)
                return -EIO;
        return key_wrap(pkey, ret);
}

typedef enum PemObject {
        PEM_PRIVATE_KEY, /* EVP_PKEY */
        PEM_CERTIFICATE, /* X509 */
} PemObject;

/* The first object of that kind in a bounded PEM buffer, owned by the caller: -EFBIG, -ENOMEM, or
 * -EINVAL when there is none. */
static int pem_read(const char *pem, size_t size, PemObject kind, void **ret) {
        _cleanup_(bio_freep) BIO *b = NULL;
        void *o;

        assert(pem);
        assert(ret);

        if (size > CLIENT_PEM_MAX)
                return -EFBIG;
        b = BIO_new_mem_buf(pem, (int) size);
        if (!b)
                return -ENOMEM;
        o = kind == PEM_PRIVATE_KEY ? (void *) PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) :
                                      (void *) PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (!o)
                return -EINVAL;
        *ret = o;
        return 0;
}

int client_key_from_pem(const char *pem, size_t size, ClientKey **ret) {
        void *pkey;
        int r;

        assert(ret);

        r = pem_read(pem, size, PEM_PRIVATE_KEY, &pkey);
        if (r < 0)
                return r;
        return key_wrap(pkey, ret);
}

ClientKey *client_key_free(ClientKey *k) {
        if (!k)
                return NULL;
        EVP_PKEY_free(k->pkey);
        free(k);
        return NULL;
}

/* Copies a memory BIO's contents into an owned NUL-terminated string. */
static int bio_to_string(BIO *b, char **ret, size_t *ret_size) {
        char *data, *out;
        long n = BIO_get_mem_data(b, &data);

        if (n <= 0)
                return -EIO;
        out = malloc((size_t) n + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, data, (size_t) n);
        out[n] = '\0';
        *ret = out;
        if (ret_size)
                *ret_size = (size_t) n;
        return 0;
}

int client_key_to_pem(const ClientKey *k, char **ret, size_t *ret_size) {
        /* The BIO's buffer is wiped by BIO_free only for secure BIOs: use one. */
        _cleanup_(bio_freep) BIO *b = BIO_new(BIO_s_secmem());

        assert(k);
        assert(ret);

        if (!b)
                return -ENOMEM;
        if (PEM_write_bio_PrivateKey(b, k->pkey, NULL, NULL, 0, NULL, NULL) != 1)
                return -EIO;
        return bio_to_string(b, ret, ret_size);
}

bool client_machine_name_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

                if (!alnum && c != '-' && c != '.')
                        return false;
                if ((i == 0 || i == n - 1) && !alnum)
                        return false;
        }
        return true;
}

char *client_common_name(const char *machine) {
        char *cn;

        if (asprintf(&cn, CLIENT_CN_PREFIX "%s", machine) < 0)
                return NULL;
        return cn;
}

static void x509_req_freep(X509_REQ **r) {
        if (*r)
                X509_REQ_free(*r);
}

int client_csr_build(const ClientKey *k, const char *machine, char **ret_pem, size_t *ret_size) {
        _cleanup_(x509_req_freep) X509_REQ *req = NULL;
        _cleanup_(bio_freep) BIO *b = NULL;
        _cleanup_free_ char *cn = NULL;
        X509_NAME *name;

        assert(k);
        assert(ret_pem);

        if (!client_machine_name_valid(machine))
                return -EINVAL;
        cn = client_common_name(machine);
        req = X509_REQ_new();
        b = BIO_new(BIO_s_mem());
        if (!cn || !req || !b)
                return -ENOMEM;
        /* As Go's pkix.Name marshals it (upstream's CSRs): O before CN, PrintableString (machine names are
         * [a-z0-9.-]), and no 64-character cap on the CN — OpenSSL enforces ub-common-name only for its
         * MBSTRING_* input types, and real machine names make CNs longer than that. */
        name = X509_REQ_get_subject_name(req);
        if (X509_REQ_set_version(req, 0) != 1 ||
            X509_NAME_add_entry_by_txt(name, "O", V_ASN1_PRINTABLESTRING,
                                       (const unsigned char *) CLIENT_ORGANIZATION, -1, -1, 0) != 1 ||
            X509_NAME_add_entry_by_txt(name, "CN", V_ASN1_PRINTABLESTRING, (const unsigned char *) cn, -1,
                                       -1, 0) != 1 ||
            X509_REQ_set_pubkey(req, k->pkey) != 1 || X509_REQ_sign(req, k->pkey, EVP_sha256()) <= 0 ||
            PEM_write_bio_X509_REQ(b, req) != 1)
                return -EIO;
        return bio_to_string(b, ret_pem, ret_size);
}

static int digest_write(EVP_MD_CTX *md, const void *data, size_t size) {
        _cleanup_free_ char *enc = NULL;
        int r;

        r = base64_encode(data, size, /* url= */ true, &enc);
        if (r < 0)
                return r;
        if (EVP_DigestUpdate(md, enc, strlen(enc)) != 1 || EVP_DigestUpdate(md, "|", 1) != 1)
                return -EIO;
        return 0;
}

static void md_ctx_freep(EVP_MD_CTX **m) {
        if (*m)
                EVP_MD_CTX_free(*m);
}

int client_csr_name(const ClientKey *k, const char *machine, char **ret) {
        _cleanup_(md_ctx_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_free_ unsigned char *der = NULL;
        _cleanup_free_ char *cn = NULL, *enc = NULL;
        unsigned char sum[EVP_MAX_MD_SIZE];
        unsigned sum_size = 0;
        int der_size, r;

        assert(k);
        assert(ret);

        if (!client_machine_name_valid(machine))
                return -EINVAL;
        cn = client_common_name(machine);
        if (!md || !cn)
                return -ENOMEM;
        der_size = i2d_PUBKEY(k->pkey, &der); /* PKIX SubjectPublicKeyInfo, like x509.MarshalPKIXPublicKey */
        if (der_size <= 0)
                return -EIO;
        if (EVP_DigestInit_ex(md, EVP_sha512_256(), NULL) != 1)
                return -EIO;
        r = digest_write(md, der, (size_t) der_size);
        if (r >= 0)
                r = digest_write(md, cn, strlen(cn));
        if (r >= 0)
                r = digest_write(md, CLIENT_ORGANIZATION, strlen(CLIENT_ORGANIZATION));
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(csr_usages); i++)
                r = digest_write(md, csr_usages[i], strlen(csr_usages[i]));
        if (r < 0)
                return r;
        if (EVP_DigestFinal_ex(md, sum, &sum_size) != 1)
                return -EIO;
        r = base64_encode(sum, sum_size, /* url= */ true, &enc);
        if (r < 0)
                return r;
        if (asprintf(ret, CLIENT_CSR_NAME_PREFIX "%s", enc) < 0)
                return -ENOMEM;
        return 0;
}

json_t *client_csr_object(const char *name, const char *csr_pem, size_t csr_size,
                          unsigned expiration_seconds) {
        _cleanup_free_ char *request = NULL;
        json_t *usages;

        assert(name);
        assert(csr_pem);

        if (base64_encode(csr_pem, csr_size, /* url= */ false, &request) < 0)
                return NULL;
        usages = json_array();
        for (size_t i = 0; usages && i < ELEMENTSOF(csr_usages); i++)
                if (json_array_append_new(usages, json_string(csr_usages[i])) < 0) {
                        json_decref(usages);
                        return NULL;
                }
        return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:o, s:I}}", "apiVersion",
                         "certificates.k8s.io/v1", "kind", "CertificateSigningRequest", "metadata", "name",
                         name, "spec", "request", request, "signerName", CLIENT_CSR_SIGNER, "usages", usages,
                         "expirationSeconds", (json_int_t) expiration_seconds);
}

static void x509_freep(X509 **x) {
        if (*x)
                X509_free(*x);
}

static int asn1_time_to_usec(const ASN1_TIME *t, uint64_t *ret) {
        struct tm tm = {};
        time_t s;

        if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
                return -EINVAL;
        s = timegm(&tm);
        if (s < 0)
                return -ERANGE;
        *ret = (uint64_t) s * USEC_PER_SEC;
        return 0;
}

int client_cert_info(const char *pem, size_t size, const ClientKey *k, ClientCertInfo *ret) {
        _cleanup_(x509_freep) X509 *x = NULL;
        ClientCertInfo info = {};
        EXTENDED_KEY_USAGE *eku;
        void *o;
        int r;

        assert(ret);

        r = pem_read(pem, size, PEM_CERTIFICATE, &o);
        if (r < 0)
                return r;
        x = o;
        if (asn1_time_to_usec(X509_get0_notBefore(x), &info.not_before_usec) < 0 ||
            asn1_time_to_usec(X509_get0_notAfter(x), &info.not_after_usec) < 0 ||
            info.not_after_usec <= info.not_before_usec)
                return -EINVAL;
        /* Read the extension itself: X509_get_extended_key_usage() answers 0 for any certificate OpenSSL's
         * extension cache finds fault with, which is not the question here. */
        eku = X509_get_ext_d2i(x, NID_ext_key_usage, NULL, NULL);
        for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku); i++)
                if (OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, i)) == NID_client_auth)
                        info.is_client_auth = true;
        EXTENDED_KEY_USAGE_free(eku);
        if (k && EVP_PKEY_eq(X509_get0_pubkey(x), k->pkey) != 1)
                return -EKEYREJECTED;
        *ret = info;
        return 0;
}

uint64_t client_cert_renew_at(const ClientCertInfo *info, uint64_t random) {
        uint64_t lifetime, permille;

        assert(info);

        lifetime = info->not_after_usec - info->not_before_usec;
        permille = 700 + random % 201; /* 70.0 % … 90.0 % */
        /* lifetime / 1000 * permille loses < 1 ms per 1000 s; fine for a renewal moment. */
        return info->not_before_usec + lifetime / 1000 * permille;
}
