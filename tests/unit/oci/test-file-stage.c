/* SPDX-License-Identifier: Apache-2.0 */
/* Staging a file (a kubelet) from an image served by the canned-response server (as a registry
 * mirror): the layer walk from the top down (found, absent → next layer, whiteout → failure),
 * installation into the store with its source.json, reuse without requests, and the argument checks.
 * The real registry, TLS and gzip layers are the kubelet-pull integration test's part. */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fake-http.h"
#include "oci/digest.h"
#include "oci/file-stage.h"
#include "test-loop.h"
#include "tests.h"

#define IMAGE "reg.test/kube/kubelet:v1.31.2"
#define KUBELET "#!/bin/sh\necho Kubernetes v1.31.2\n"
#define LAYER_MT "application/vnd.oci.image.layer.v1.tar"

typedef struct Layer {
        char data[16384];
        size_t size;
        char digest[DIGEST_STRING_MAX];
} Layer;

typedef struct Ctx {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        RegistryClient *registry;
        FileStore *store;
        FileStage *stage;
        char dir[64];
        char mirror_url[64];

        bool done;
        FileStageResult res;
        char message[512], path[256], file_digest[DIGEST_STRING_MAX];
        uint64_t progress_done, progress_total;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));
        RegistryMirror mirror = { .host = (char *) "reg.test", .url = c->mirror_url };
        char blobs[128], root[128], staging[128];

        assert_non_null(c);
        assert_int_equal(sd_event_new(&c->event), 0);
        assert_int_equal(fake_http_new(c->event, &c->fake), 0);
        assert_int_equal(http_new(c->event, &c->http), 0);
        strcpy(c->dir, "/tmp/test-file-stage-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(blobs, sizeof(blobs), "%s/blobs", c->dir);
        snprintf(root, sizeof(root), "%s/kubelet", c->dir);
        snprintf(staging, sizeof(staging), "%s/staging", c->dir);
        snprintf(c->mirror_url, sizeof(c->mirror_url), "http://127.0.0.1:%u/", fake_http_port(c->fake));
        assert_int_equal(registry_client_new(c->event, c->http,
                                             &(RegistryOptions) { .mirrors = &mirror,
                                                                  .n_mirrors = 1,
                                                                  .blob_directory = blobs,
                                                                  .max_attempts = 1,
                                                                  .retry_base_usec = 10 * USEC_PER_MSEC,
                                                                  .min_free_bytes = 1 },
                                             &c->registry),
                         0);
        assert_int_equal(file_store_new(root, staging, "kubelet", &c->store), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        file_stage_free(c->stage);
        file_store_free(c->store);
        registry_client_free(c->registry);
        http_free(c->http);
        fake_http_free(c->fake);
        sd_event_unref(c->event);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

/* An uncompressed tar with one regular file. */
static void make_layer(Layer *l, const char *name, const char *content) {
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        Digest d;

        assert_non_null(a);
        assert_non_null(e);
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_none(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_memory(a, l->data, sizeof(l->data), &l->size), ARCHIVE_OK);
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0755);
        archive_entry_set_size(e, (la_int64_t) strlen(content));
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, content, strlen(content)), (la_ssize_t) strlen(content));
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        archive_entry_free(e);
        assert_int_equal(digest_buffer(l->data, l->size, &d), 0);
        digest_format(&d, l->digest);
}

/* Layers from the bottom up. */
static void push_manifest_n(Ctx *c, const Layer *const *layers, size_t n) {
        char m[4096];
        int k;

        k = snprintf(
                m, sizeof(m),
                "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":"
                "\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":2},\"layers\":[");
        for (size_t i = 0; i < n; i++)
                k += snprintf(m + k, sizeof(m) - (size_t) k,
                              "%s{\"mediaType\":\"" LAYER_MT "\",\"digest\":\"%s\",\"size\":%zu}",
                              i > 0 ? "," : "", layers[i]->digest, layers[i]->size);
        snprintf(m + k, sizeof(m) - (size_t) k, "]}");
        assert_int_equal(
                fake_http_push(
                        c->fake,
                        &(FakeResponse) {
                                .status = 200,
                                .body = m,
                                .headers = "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n" }),
                0);
}

static void push_manifest(Ctx *c, const Layer *bottom, const Layer *top) {
        push_manifest_n(c, (const Layer *const[]) { bottom, top }, 2);
}

static void push_blob(Ctx *c, const Layer *l) {
        assert_int_equal(
                fake_http_push(c->fake,
                               &(FakeResponse) { .status = 200, .body = l->data, .body_size = l->size }),
                0);
}

static void on_done(FileStage *st, const FileStageResult *res, void *userdata) {
        Ctx *c = userdata;

        assert_false(c->done);
        c->done = true;
        c->res = *res;
        snprintf(c->message, sizeof(c->message), "%s", strempty(res->message));
        snprintf(c->path, sizeof(c->path), "%s", strempty(res->path));
        snprintf(c->file_digest, sizeof(c->file_digest), "%s", strempty(res->file_digest));
        c->res.message = c->res.path = c->res.file_digest = c->res.version = c->res.manifest_digest = NULL;
        c->stage = file_stage_free(st); /* allowed from the callback */
}

static void on_progress(FileStage *st, uint64_t done, uint64_t total, void *userdata) {
        Ctx *c = userdata;

        c->progress_done = done;
        c->progress_total = total;
}

static void stage(Ctx *c) {
        c->done = false;
        assert_int_equal(file_stage_start(c->event, c->registry, c->store,
                                          &(FileStageRequest) { .image = IMAGE, .file_path = "/kubelet" },
                                          on_progress, on_done, c, &c->stage),
                         0);
        assert_false(c->done); /* never from inside start */
        TEST_LOOP_UNTIL(c->event, c->done, 20 * USEC_PER_SEC);
}

static void assert_installed(Ctx *c) {
        char expected[256], buf[256] = {}, digest[DIGEST_STRING_MAX];
        FILE *f;
        Digest d;

        snprintf(expected, sizeof(expected), "%s/kubelet/1.31.2/kubelet", c->dir);
        assert_string_equal(c->path, expected);
        f = fopen(c->path, "re");
        assert_non_null(f);
        assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
        fclose(f);
        assert_string_equal(buf, KUBELET);
        if (c->res.reused) {
                assert_string_equal(c->file_digest, "");
                return;
        }
        assert_int_equal(digest_buffer(KUBELET, strlen(KUBELET), &d), 0);
        assert_string_equal(c->file_digest, digest_format(&d, digest));
}

static void test_found_in_top_layer(void **state) {
        Ctx *c = *state;
        Layer bottom, top;
        _cleanup_free_ char *source = NULL;

        make_layer(&bottom, "etc/os-release", "ID=test\n");
        make_layer(&top, "kubelet", KUBELET);
        push_manifest(c, &bottom, &top);
        push_blob(c, &top);
        stage(c);
        assert_int_equal(c->res.error, 0);
        assert_int_equal(c->res.failure, ARTIFACT_FAILURE_NONE);
        assert_false(c->res.reused);
        assert_installed(c);
        /* The bottom layer was never fetched. */
        assert_int_equal(fake_http_requests(c->fake), 2);
        assert_non_null(strstr(fake_http_request(c->fake, 1), top.digest));
        assert_int_equal(c->res.bytes_downloaded, top.size);
        assert_int_equal(c->progress_total, top.size + bottom.size);

        assert_int_equal(file_store_read_source(c->store, "1.31.2", &source), 0);
        assert_non_null(strstr(source, "\"image\": \"" IMAGE "\""));
        assert_non_null(strstr(source, top.digest));

        /* The same image and path again: from the store, without a request. */
        stage(c);
        assert_int_equal(c->res.error, 0);
        assert_true(c->res.reused);
        assert_installed(c);
        assert_int_equal(fake_http_requests(c->fake), 2);
}

static void test_found_in_lower_layer(void **state) {
        Ctx *c = *state;
        Layer bottom, middle, top;

        /* Layer by layer from the top down; the bottom one is never needed. */
        make_layer(&bottom, "bin/sh", "x");
        make_layer(&middle, "kubelet", KUBELET);
        make_layer(&top, "etc/motd", "hello\n");
        push_manifest_n(c, (const Layer *const[]) { &bottom, &middle, &top }, 3);
        push_blob(c, &top);
        push_blob(c, &middle);
        stage(c);
        assert_int_equal(c->res.error, 0);
        assert_installed(c);
        assert_int_equal(fake_http_requests(c->fake), 3);
        assert_non_null(strstr(fake_http_request(c->fake, 1), top.digest));
        assert_non_null(strstr(fake_http_request(c->fake, 2), middle.digest));
        assert_int_equal(c->res.bytes_downloaded, top.size + middle.size);
        assert_int_equal(c->progress_total, top.size + middle.size + bottom.size);
}

static void test_whiteout_fails(void **state) {
        Ctx *c = *state;
        Layer bottom, top;

        make_layer(&bottom, "kubelet", KUBELET);
        make_layer(&top, ".wh.kubelet", "");
        push_manifest(c, &bottom, &top);
        push_blob(c, &top);
        stage(c);
        assert_int_equal(c->res.error, -ENOENT);
        assert_int_equal(c->res.failure, ARTIFACT_FAILURE_UNAVAILABLE);
        assert_non_null(strstr(c->message, "deleted in layer 1"));
        assert_int_equal(fake_http_requests(c->fake), 2);
}

static void test_absent_fails(void **state) {
        Ctx *c = *state;
        Layer bottom, top;

        make_layer(&bottom, "bin/sh", "x");
        make_layer(&top, "etc/motd", "hello\n");
        push_manifest(c, &bottom, &top);
        push_blob(c, &top);
        push_blob(c, &bottom);
        stage(c);
        assert_int_equal(c->res.error, -ENOENT);
        assert_int_equal(c->res.failure, ARTIFACT_FAILURE_UNAVAILABLE);
        assert_string_equal(c->message, "/kubelet not found in image " IMAGE);
}

static void test_blob_digest_mismatch(void **state) {
        Ctx *c = *state;
        Layer bottom, top, other;

        make_layer(&bottom, "bin/sh", "x");
        make_layer(&top, "kubelet", KUBELET);
        make_layer(&other, "kubelet", "#!/bin/sh\necho evil\n");
        push_manifest(c, &bottom, &top);
        push_blob(c, &other);
        stage(c);
        assert_true(c->res.error < 0);
        assert_int_not_equal(c->res.failure, ARTIFACT_FAILURE_NONE);
        assert_int_equal(file_store_has(c->store, "1.31.2"), 0);
}

static void test_invalid_request(void **state) {
        Ctx *c = *state;
        static const FileStageRequest bad[] = {
                { .image = "", .file_path = "/kubelet" },
                { .image = IMAGE, .file_path = "" },
                /* no tag to take the version from */
                { .image =
                          "reg.test/kube/kubelet@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                  .file_path = "/kubelet" },
                { .image = IMAGE, .file_path = "/kubelet", .version = "../x" },
                { .image = "UPPER CASE/x", .file_path = "/kubelet" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(file_stage_start(c->event, c->registry, c->store, &bad[i], NULL, on_done, c,
                                                  &c->stage),
                                 -EINVAL);
        assert_null(c->stage);
        TEST_LOOP_NOT(c->event, c->done, 100 * USEC_PER_MSEC);
        assert_int_equal(fake_http_requests(c->fake), 0);
}

static void test_failure_from_extract_error(void **state) {
        assert_int_equal(file_stage_failure_from_extract_error(-EXDEV), ARTIFACT_FAILURE_UNSAFE_ARCHIVE);
        assert_int_equal(file_stage_failure_from_extract_error(-EBADMSG), ARTIFACT_FAILURE_UNSAFE_ARCHIVE);
        assert_int_equal(file_stage_failure_from_extract_error(-EFBIG), ARTIFACT_FAILURE_UNSAFE_ARCHIVE);
        assert_int_equal(file_stage_failure_from_extract_error(-ENOSPC), ARTIFACT_FAILURE_DISK_SPACE);
        assert_int_equal(file_stage_failure_from_extract_error(-EDQUOT), ARTIFACT_FAILURE_DISK_SPACE);
        assert_int_equal(file_stage_failure_from_extract_error(-EIO), ARTIFACT_FAILURE_UNAVAILABLE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_found_in_top_layer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_found_in_lower_layer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_whiteout_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_absent_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blob_digest_mismatch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_invalid_request, setup, teardown),
                cmocka_unit_test(test_failure_from_extract_error),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
