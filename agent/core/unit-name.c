/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/unit-name.h"
#include "util/macro.h"

static const char *const unit_types[] = {
        ".service", ".socket", ".target", ".device", ".mount", ".automount",
        ".swap",    ".timer",  ".path",   ".slice",  ".scope",
};

const char *unit_name_type(const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; i < ELEMENTSOF(unit_types); i++) {
                size_t l = strlen(unit_types[i]);
                if (n > l && streq(name + n - l, unit_types[i]))
                        return unit_types[i];
        }
        return NULL;
}

bool unit_name_has_type_suffix(const char *name) {
        return unit_name_type(name);
}

static bool valid_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
                c == '_' || c == '.' || c == '-' || c == '@';
}

static int reject(const char **ret_why, const char *why) {
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}

int unit_name_normalize(const char *name, char **ret, const char **ret_why) {
        const char *at;
        bool suffixed;
        char *out;

        assert(ret);

        if (isempty(name))
                return reject(ret_why, "empty unit name");
        for (const char *c = name; *c; c++) {
                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        return reject(ret_why, "contains a control character");
                if (*c == ' ' || *c == '\t')
                        return reject(ret_why, "contains whitespace");
                if (*c == '/')
                        return reject(ret_why, "contains '/'");
                if (!valid_char(*c))
                        return reject(ret_why, "contains a character outside [A-Za-z0-9:_.\\-@]");
        }
        if (name[0] == '.' || name[0] == '-' || name[0] == '@')
                return reject(ret_why, "must start with a letter, digit, ':' or '_'");
        if (strstr(name, ".."))
                return reject(ret_why, "contains \"..\"");

        at = strchr(name, '@');
        if (at && strchr(at + 1, '@'))
                return reject(ret_why, "contains more than one '@'");

        suffixed = unit_name_has_type_suffix(name);
        if (strlen(name) + (suffixed ? 0 : strlen(".service")) > UNIT_NAME_MAX)
                return reject(ret_why, "longer than 255 bytes");
        if (!suffixed && name[strlen(name) - 1] == '.')
                return reject(ret_why, "ends with '.'");

        if (asprintf(&out, "%s%s", name, suffixed ? "" : ".service") < 0)
                return -ENOMEM;
        if (at && (out[at - name + 1] == '.' && unit_name_has_type_suffix(out + (at - name)))) {
                /* "foo@.service" is a template; it cannot be restarted. */
                free(out);
                return reject(ret_why, "is a template without an instance");
        }
        *ret = out;
        return 0;
}
