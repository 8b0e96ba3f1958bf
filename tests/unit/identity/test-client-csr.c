/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "identity/client-csr.h"
#include "tests.h"
#include "util/base64.h"

/* A fixed P-256 key; its digested CSR name was computed independently (Python hashlib sha512_256 over the
 * base64url of `openssl pkey -pubout -outform DER`, the CN, the O and the usages, each followed by '|'). */
static const char fixed_key[] = "-----BEGIN PRIVATE KEY-----\n"
                                "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLFBbXLmd1u6urrLE\n"
                                "FJRMg6utaw0alf+inopsK7iZVyWhRANCAAQSTsTDyA7zT6WuLUml5qLPQGZEe+Qv\n"
                                "g2czAyDjp6Z600H75XYG3Yuz/97A4EdevAbZ/NN+VS2rnt7Odv7Kkl1l\n"
                                "-----END PRIVATE KEY-----\n";
static const char fixed_name[] = "node-agent-csr-FmGP1V7_DroRQs_WUzFQQxXMKTQi-_UHG-DwXOyINT4";

static X509_REQ *parse_csr(const char *pem, size_t size) {
        BIO *b = BIO_new_mem_buf(pem, (int) size);
        X509_REQ *req = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);

        BIO_free(b);
        assert_non_null(req);
        return req;
}

static void test_csr_verifies_with_subject(void **state) {
        _cleanup_(client_key_freep) ClientKey *k = NULL;
        _cleanup_free_ char *pem = NULL, *key_pem = NULL;
        size_t size, key_size;
        X509_REQ *req;
        X509_NAME *name;
        EVP_PKEY *pub;
        BIO *b;
        EVP_PKEY *priv;
        char buf[256];

        assert_int_equal(client_key_generate(&k), 0);
        /* A CN of 65 characters: longer than X.520's 64, which Go (upstream) does not enforce either. */
        assert_int_equal(client_csr_build(k, "shoot--p--s-worker-abc-z1-5d8f7", &pem, &size), 0);
        assert_int_equal(strlen(pem), size);
        assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE REQUEST-----"));

        req = parse_csr(pem, size);
        pub = X509_REQ_get0_pubkey(req);
        assert_int_equal(X509_REQ_verify(req, pub), 1); /* self-signature */
        assert_int_equal(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
        assert_int_equal(EVP_PKEY_get_bits(pub), 256);

        name = X509_REQ_get_subject_name(req);
        assert_int_equal(X509_NAME_entry_count(name), 2);
        assert_int_equal(OBJ_obj2nid(X509_NAME_ENTRY_get_object(X509_NAME_get_entry(name, 0))),
                         NID_organizationName); /* Go's pkix.Name order: O before CN */
        assert_true(X509_NAME_get_text_by_NID(name, NID_commonName, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "gardener.cloud:node-agent:machine:shoot--p--s-worker-abc-z1-5d8f7");
        assert_true(X509_NAME_get_text_by_NID(name, NID_organizationName, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "gardener.cloud:node-agents");

        /* The request carries the public half of our key. */
        assert_int_equal(client_key_to_pem(k, &key_pem, &key_size), 0);
        b = BIO_new_mem_buf(key_pem, (int) key_size);
        priv = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        assert_non_null(priv);
        assert_int_equal(EVP_PKEY_eq(priv, pub), 1);
        EVP_PKEY_free(priv);
        BIO_free(b);
        X509_REQ_free(req);
        OPENSSL_cleanse(key_pem, key_size);
}

static void test_bad_machine_names(void **state) {
        _cleanup_(client_key_freep) ClientKey *k = NULL;
        static const char *const bad[] = { "", "UPPER", "-lead", "trail-", "a/b", "a b", "a\nb", "ä" };
        char *pem = NULL, *name = NULL;
        size_t size;

        assert_int_equal(client_key_generate(&k), 0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_false(client_machine_name_valid(bad[i]));
                assert_int_equal(client_csr_build(k, bad[i], &pem, &size), -EINVAL);
                assert_int_equal(client_csr_name(k, bad[i], &name), -EINVAL);
        }
        assert_false(client_machine_name_valid(NULL));
        assert_true(client_machine_name_valid("n1"));
        assert_true(client_machine_name_valid("a.b-c"));
}

static void test_digested_name_matches_upstream(void **state) {
        _cleanup_(client_key_freep) ClientKey *k = NULL, *k2 = NULL;
        _cleanup_free_ char *name = NULL, *again = NULL, *other = NULL;

        assert_int_equal(client_key_from_pem(fixed_key, strlen(fixed_key), &k), 0);
        assert_int_equal(client_csr_name(k, "machine-1", &name), 0);
        assert_string_equal(name, fixed_name);
        assert_int_equal(client_csr_name(k, "machine-1", &again), 0);
        assert_string_equal(again, name); /* deterministic per key */
        assert_int_equal(client_key_generate(&k2), 0);
        assert_int_equal(client_csr_name(k2, "machine-1", &other), 0);
        assert_string_not_equal(other, name);
        assert_int_equal(client_key_from_pem("garbage", 7, &k2), -EINVAL);
}

static void test_csr_object(void **state) {
        json_t *o = client_csr_object("node-agent-csr-x", "PEM", 3, 3600);
        json_t *usages;

        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "kind")), "CertificateSigningRequest");
        assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), "certificates.k8s.io/v1");
        assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                            "node-agent-csr-x");
        assert_string_equal(json_string_value(json_object_get(json_object_get(o, "spec"), "request")),
                            "UEVN");
        assert_string_equal(json_string_value(json_object_get(json_object_get(o, "spec"), "signerName")),
                            "kubernetes.io/kube-apiserver-client");
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(o, "spec"), "expirationSeconds")), 3600);
        usages = json_object_get(json_object_get(o, "spec"), "usages");
        assert_int_equal(json_array_size(usages), 3);
        assert_string_equal(json_string_value(json_array_get(usages, 2)), "client auth");
        json_decref(o);
}

/* A certificate for `k` made here with libcrypto, valid [nb, na) seconds since the epoch. */
static char *make_cert(const ClientKey *k, time_t nb, time_t na, bool client_auth) {
        _cleanup_free_ char *key_pem = NULL;
        EVP_PKEY *pkey;
        X509 *x = X509_new();
        BIO *b;
        char *data, *out;
        long n;
        size_t ks;

        assert_int_equal(client_key_to_pem(k, &key_pem, &ks), 0);
        b = BIO_new_mem_buf(key_pem, (int) ks);
        pkey = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        BIO_free(b);
        X509_set_version(x, 2);
        ASN1_TIME_set(X509_getm_notBefore(x), nb);
        ASN1_TIME_set(X509_getm_notAfter(x), na);
        X509_set_pubkey(x, pkey);
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, (const unsigned char *) "t",
                                   -1, -1, 0);
        X509_set_issuer_name(x, X509_get_subject_name(x));
        if (client_auth) {
                X509V3_CTX ctx;
                X509_EXTENSION *ext;

                X509V3_set_ctx_nodb(&ctx);
                X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
                ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_ext_key_usage, "clientAuth");
                X509_add_ext(x, ext, -1);
                X509_EXTENSION_free(ext);
        }
        assert_true(X509_sign(x, pkey, EVP_sha256()) > 0);
        b = BIO_new(BIO_s_mem());
        PEM_write_bio_X509(b, x);
        n = BIO_get_mem_data(b, &data);
        out = strndup(data, (size_t) n);
        BIO_free(b);
        X509_free(x);
        EVP_PKEY_free(pkey);
        OPENSSL_cleanse(key_pem, ks);
        return out;
}

static void test_cert_info_and_renewal(void **state) {
        _cleanup_(client_key_freep) ClientKey *k = NULL, *other = NULL;
        _cleanup_free_ char *cert = NULL;
        ClientCertInfo info;
        uint64_t lo = UINT64_MAX, hi = 0;

        assert_int_equal(client_key_generate(&k), 0);
        assert_int_equal(client_key_generate(&other), 0);
        cert = make_cert(k, 1000000, 1001000, /* client_auth= */ true);
        assert_int_equal(client_cert_info(cert, strlen(cert), k, &info), 0);
        assert_int_equal(info.not_before_usec, 1000000 * USEC_PER_SEC);
        assert_int_equal(info.not_after_usec, 1001000 * USEC_PER_SEC);
        assert_true(info.is_client_auth);
        assert_int_equal(client_cert_info(cert, strlen(cert), other, &info), -EKEYREJECTED);
        assert_int_equal(client_cert_info("nope", 4, NULL, &info), -EINVAL);

        assert_int_equal(client_cert_info(cert, strlen(cert), NULL, &info), 0);
        assert_int_equal(client_cert_renew_at(&info, 0), (1000000 + 700) * USEC_PER_SEC);
        assert_int_equal(client_cert_renew_at(&info, 200), (1000000 + 900) * USEC_PER_SEC);
        for (uint64_t r = 0; r < 5000; r++) {
                uint64_t at = client_cert_renew_at(&info, r * 2654435761U);

                lo = MIN(lo, at);
                hi = MAX(hi, at);
        }
        assert_int_equal(lo, (1000000 + 700) * USEC_PER_SEC);
        assert_int_equal(hi, (1000000 + 900) * USEC_PER_SEC);

        free(cert);
        cert = make_cert(k, 1000000, 1001000, /* client_auth= */ false);
        assert_int_equal(client_cert_info(cert, strlen(cert), k, &info), 0);
        assert_false(info.is_client_auth);
}

static void test_base64(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        assert_int_equal(base64_encode("\xfb\xff\xfe", 3, false, &a), 0);
        assert_string_equal(a, "+//+");
        assert_int_equal(base64_encode("\xfb\xff\xfe\x01", 4, true, &b), 0);
        assert_string_equal(b, "-__-AQ");
        assert_int_equal(base64_encode("", 0, false, &c), 0);
        assert_string_equal(c, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_csr_verifies_with_subject),
                cmocka_unit_test(test_bad_machine_names),
                cmocka_unit_test(test_digested_name_matches_upstream),
                cmocka_unit_test(test_csr_object),
                cmocka_unit_test(test_cert_info_and_renewal),
                cmocka_unit_test(test_base64),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
