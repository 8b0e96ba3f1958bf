/* SPDX-License-Identifier: Apache-2.0 */
#include "os/boot-entry.h"
#include "tests.h"
#include "util/strv.h"

static void test_format(void **state) {
        static const struct {
                const char *prefix, *version;
                unsigned tries;
                const char *out; /* NULL: -EINVAL */
        } table[] = {
                { "os", "1592.6", 3, "os-1592.6+3.efi" },
                { "os", "1592.6", 0, "os-1592.6.efi" },
                { "os", "v1.2.3-rc.1", 1, "os-v1.2.3-rc.1+1.efi" },
                { "garden_linux", "1592.6.0~x", 99, "garden_linux-1592.6.0~x+99.efi" },
                { "os", "1.2+build", 3, NULL }, /* '+' would be read as a counter */
                { "os", "", 3, NULL },
                { "os", "linux", 3, NULL }, /* must start with a digit */
                { "os", "1/../x", 3, NULL },
                { "os", "1..2", 3, NULL },
                { "os", "1 2", 3, NULL },
                { "", "1.2", 3, NULL },
                { ".os", "1.2", 3, NULL },
                { "o+s", "1.2", 3, NULL },
                { "o/s", "1.2", 3, NULL },
                { "os", "1.2", 1000, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL;
                int r = boot_entry_name_format(table[i].prefix, table[i].version, table[i].tries, &out);

                if (table[i].out) {
                        assert_int_equal(r, 0);
                        assert_string_equal(out, table[i].out);
                } else {
                        assert_int_equal(r, -EINVAL);
                        assert_null(out);
                }
        }
}

static void test_version_length_limit(void **state) {
        char v[BOOT_ENTRY_VERSION_MAX + 2];
        _cleanup_free_ char *out = NULL;

        memset(v, '1', sizeof(v) - 1);
        v[sizeof(v) - 1] = '\0';
        assert_false(boot_entry_version_is_valid(v));
        v[BOOT_ENTRY_VERSION_MAX] = '\0';
        assert_true(boot_entry_version_is_valid(v));
        assert_int_equal(boot_entry_name_format("os", v, 3, &out), 0);
}

static void test_parse(void **state) {
        static const struct {
                const char *name;
                int r;
                const char *version;
                bool counter;
                unsigned left, done;
        } table[] = {
                { "os-1592.6.efi", 0, "1592.6", false, 0, 0 },
                { "os-1592.6+3.efi", 0, "1592.6", true, 3, 0 },
                { "os-1592.6+2-1.efi", 0, "1592.6", true, 2, 1 },
                { "os-1592.6+0-3.efi", 0, "1592.6", true, 0, 3 },
                { "os-1592.6+0-3.EFI", 0, "1592.6", true, 0, 3 },
                { "os-v1.2-rc1.efi", 0, "v1.2-rc1", false, 0, 0 },
                { "os-1.2-3.efi", 0, "1.2-3", false, 0, 0 }, /* '-' without '+' is version */
                { "os-1.2+.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-1.2+3-.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-1.2+x.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-1.2+3-4-5.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-1.2+1234567890.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-1.2+3.conf", -EINVAL, NULL, false, 0, 0 },
                { "os-.efi", -EINVAL, NULL, false, 0, 0 },
                { "os.efi", -EINVAL, NULL, false, 0, 0 },
                { "os-extra-1.2.efi", -EINVAL, NULL, false, 0, 0 }, /* another tool's file */
                { "osx-1.2.efi", -EINVAL, NULL, false, 0, 0 },
                { "other-1.2.efi", -EINVAL, NULL, false, 0, 0 },
                { ".os-1.2+3.efi.tmp-abcdef", -EINVAL, NULL, false, 0, 0 },
                { "os-", -EINVAL, NULL, false, 0, 0 },
                { "os", -EINVAL, NULL, false, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                BootEntryName n = { .version = (char *) "untouched" };
                int r = boot_entry_name_parse("os", table[i].name, &n);

                assert_int_equal(r, table[i].r);
                if (r < 0) {
                        assert_string_equal(n.version, "untouched");
                        continue;
                }
                assert_string_equal(n.version, table[i].version);
                assert_int_equal(n.has_counter, table[i].counter);
                assert_int_equal(n.tries_left, table[i].left);
                assert_int_equal(n.tries_done, table[i].done);
                boot_entry_name_done(&n);
        }
}

static void test_format_parse_roundtrip(void **state) {
        static const char *const versions[] = { "1", "1592.6", "v2.0.0-rc.1", "3_4~5" };

        for (size_t i = 0; i < ELEMENTSOF(versions); i++)
                for (unsigned tries = 0; tries < 5; tries++) {
                        _cleanup_free_ char *name = NULL;
                        BootEntryName n;

                        assert_int_equal(boot_entry_name_format("os", versions[i], tries, &name), 0);
                        assert_int_equal(boot_entry_name_parse("os", name, &n), 0);
                        assert_string_equal(n.version, versions[i]);
                        assert_int_equal(n.has_counter, tries > 0);
                        assert_int_equal(n.tries_left, tries);
                        boot_entry_name_done(&n);
                }
}

static void test_strip_counter(void **state) {
        static const struct {
                const char *in, *out;
        } table[] = {
                { "os-1.2+2-1.efi", "os-1.2.efi" },
                { "os-1.2+3.efi", "os-1.2.efi" },
                { "os-1.2.efi", "os-1.2.efi" },
                { "os-1.2+0-3.EFI", "os-1.2.EFI" },
                { "os-1.2+x.efi", "os-1.2+x.efi" },
                { "os-1.2+3", "os-1.2" }, /* LoaderEntrySelected may lack .efi */
                { "plain", "plain" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL;

                assert_int_equal(boot_entry_strip_counter(table[i].in, &out), 0);
                assert_string_equal(out, table[i].out);
        }
}

static void test_temp_names(void **state) {
        _cleanup_free_ char *t = NULL;

        assert_int_equal(boot_entry_temp_template("os-1.2+3.efi", &t), 0);
        assert_string_equal(t, ".os-1.2+3.efi.tmp-XXXXXX");
        assert_true(boot_entry_is_temp_name("os", ".os-1.2+3.efi.tmp-a1B2c3"));
        assert_false(boot_entry_is_temp_name("os", ".os-1.2+3.efi.tmp-a1B2c"));
        assert_false(boot_entry_is_temp_name("os", ".other-1.2+3.efi.tmp-a1B2c3"));
        assert_false(boot_entry_is_temp_name("os", "os-1.2+3.efi"));
        assert_false(boot_entry_is_temp_name("os", ".osx-1.2.efi.tmp-a1B2c3"));
}

static void test_version_equivalent(void **state) {
        static const struct {
                const char *a, *b;
                bool eq;
        } table[] = {
                { "1592.6", "1592.6", true },    { "1592.6", "1592.6.0", true },
                { "1592.6.0", "v1592.6", true }, { "1592.6.0-foo", "1592.6", true },
                { "1592.06", "1592.6", true },   { "0", "0.0.0", true },
                { "1592.6", "1592.60", false },  { "1592.6", "1592.6.1", false },
                { "1592.6", "1592.7", false },   { "12", "1.2", false },
                { "1.2", NULL, false },          { NULL, NULL, false },
                { "abc", "abc", true },          { "abc", "abd", false },
                { "abc", "1", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                assert_int_equal(boot_entry_version_equivalent(table[i].a, table[i].b), table[i].eq);
                assert_int_equal(boot_entry_version_equivalent(table[i].b, table[i].a), table[i].eq);
        }
}

static char *const listing[] = {
        "os-1.0.efi",     /* old, good */
        "os-1.1+0-3.efi", /* old, bad */
        "os-1.2.efi",     /* running */
        "os-1.3+1-2.efi", /* stale attempt at the version being installed */
        "os-0.9+3.efi",   /* booted according to LoaderEntrySelected */
        "other-1.0.efi",  /* not ours */
        "os-extra.efi",   /* not ours */
        "README",
        ".os-1.3+3.efi.tmp-AbCdEf",  /* leftover of a crashed install */
        ".other-1.3.efi.tmp-AbCdEf", /* not ours */
};

static void test_select_removals(void **state) {
        _cleanup_strv_free_ char **rm = NULL;

        assert_int_equal(boot_entry_select_removals("os", listing, ELEMENTSOF(listing), "1.3", "1.2",
                                                    "os-0.9.efi", &rm),
                         0);
        assert_int_equal(strv_length(rm), 4);
        assert_true(strv_contains(rm, "os-1.0.efi"));
        assert_true(strv_contains(rm, "os-1.1+0-3.efi"));
        assert_true(strv_contains(rm, "os-1.3+1-2.efi"));
        assert_true(strv_contains(rm, ".os-1.3+3.efi.tmp-AbCdEf"));
}

static void test_select_removals_running_equivalent(void **state) {
        _cleanup_strv_free_ char **rm = NULL;

        /* os-release says "1.2.0", the entry says "1.2": still the running one. */
        assert_int_equal(
                boot_entry_select_removals("os", listing, ELEMENTSOF(listing), "1.3", "1.2.0", NULL, &rm),
                0);
        assert_false(strv_contains(rm, "os-1.2.efi"));
        assert_true(strv_contains(rm, "os-0.9+3.efi"));
        assert_int_equal(strv_length(rm), 5);
}

static void test_select_removals_booted_case_insensitive(void **state) {
        _cleanup_strv_free_ char **rm = NULL;

        assert_int_equal(boot_entry_select_removals("os", listing, ELEMENTSOF(listing), "1.3", "1.2",
                                                    "OS-0.9+2-1.EFI", &rm),
                         0);
        assert_false(strv_contains(rm, "os-0.9+3.efi"));
}

static void test_select_removals_unknown_running(void **state) {
        _cleanup_strv_free_ char **rm = NULL;

        /* Without knowing what runs, only temporaries and stale copies of the target go. */
        assert_int_equal(
                boot_entry_select_removals("os", listing, ELEMENTSOF(listing), "1.3", NULL, NULL, &rm), 0);
        assert_int_equal(strv_length(rm), 2);
        assert_true(strv_contains(rm, "os-1.3+1-2.efi"));
        assert_true(strv_contains(rm, ".os-1.3+3.efi.tmp-AbCdEf"));
}

static void test_select_removals_never_running_even_if_target(void **state) {
        _cleanup_strv_free_ char **rm = NULL;
        char *const names[] = { "os-1.2+3.efi", "os-1.2.efi" };

        /* A caller bug (installing the running version) still cannot delete the running entry. */
        assert_int_equal(boot_entry_select_removals("os", names, ELEMENTSOF(names), "1.2", "1.2", NULL, &rm),
                         0);
        assert_int_equal(strv_length(rm), 0);
}

static void test_select_removals_limit(void **state) {
        char **rm = NULL;
        char *const names[] = { "os-1.0.efi" };

        assert_int_equal(
                boot_entry_select_removals("os", names, BOOT_ENTRY_LISTING_MAX + 1, "1.3", "1.2", NULL, &rm),
                -E2BIG);
        assert_null(rm);
}

static void test_state_of(void **state) {
        static const struct {
                const char *version;
                BootEntryState s;
        } table[] = {
                { "1.0", BOOT_ENTRY_GOOD },    { "1.1", BOOT_ENTRY_BAD },    { "1.3", BOOT_ENTRY_PENDING },
                { "0.9", BOOT_ENTRY_PENDING }, { "2.0", BOOT_ENTRY_ABSENT },
        };
        char *const both[] = { "os-2.0+0-3.efi", "os-2.0.efi" };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                assert_int_equal(boot_entry_state_of("os", listing, ELEMENTSOF(listing), table[i].version),
                                 table[i].s);
        assert_int_equal(boot_entry_state_of("os", both, ELEMENTSOF(both), "2.0"), BOOT_ENTRY_GOOD);
}

static void test_state_strings(void **state) {
        for (BootEntryState s = 0; s < _BOOT_ENTRY_STATE_MAX; s++) {
                assert_non_null(boot_entry_state_to_string(s));
                assert_int_equal(boot_entry_state_from_string(boot_entry_state_to_string(s)), s);
        }
        assert_null(boot_entry_state_to_string(_BOOT_ENTRY_STATE_MAX));
        assert_int_equal(boot_entry_state_from_string("nope"), _BOOT_ENTRY_STATE_INVALID);
}

static void test_decode_efivar(void **state) {
        static const uint8_t ok[] = { 7, 0,   0, 0,   'o', 0,   's', 0,   '-', 0, '1',
                                      0, '.', 0, 'e', 0,   'f', 0,   'i', 0,   0, 0 };
        static const uint8_t no_nul[] = { 7, 0, 0, 0, 'a', 0, 'b', 0 };
        static const uint8_t odd[] = { 7, 0, 0, 0, 'a', 0, 'b' };
        static const uint8_t non_ascii[] = { 7, 0, 0, 0, 0xe9, 0, 0, 0 };
        static const uint8_t short_attr[] = { 7, 0, 0 };
        char *s = NULL;

        assert_int_equal(boot_entry_decode_efivar_string(ok, sizeof(ok), &s), 0);
        assert_string_equal(s, "os-1.efi");
        free(s);
        assert_int_equal(boot_entry_decode_efivar_string(no_nul, sizeof(no_nul), &s), 0);
        assert_string_equal(s, "ab");
        free(s);
        s = NULL;
        assert_int_equal(boot_entry_decode_efivar_string(odd, sizeof(odd), &s), -EBADMSG);
        assert_int_equal(boot_entry_decode_efivar_string(non_ascii, sizeof(non_ascii), &s), -EBADMSG);
        assert_int_equal(boot_entry_decode_efivar_string(short_attr, sizeof(short_attr), &s), -EBADMSG);
        assert_null(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_version_length_limit),
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_format_parse_roundtrip),
                cmocka_unit_test(test_strip_counter),
                cmocka_unit_test(test_temp_names),
                cmocka_unit_test(test_version_equivalent),
                cmocka_unit_test(test_select_removals),
                cmocka_unit_test(test_select_removals_running_equivalent),
                cmocka_unit_test(test_select_removals_booted_case_insensitive),
                cmocka_unit_test(test_select_removals_unknown_running),
                cmocka_unit_test(test_select_removals_never_running_even_if_target),
                cmocka_unit_test(test_select_removals_limit),
                cmocka_unit_test(test_state_of),
                cmocka_unit_test(test_state_strings),
                cmocka_unit_test(test_decode_efivar),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
