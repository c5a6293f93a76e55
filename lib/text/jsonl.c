#include "text/jsonl.h"

#include <jansson.h>
#include <string.h>

#include "base/grow.h"

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The text's non-blank lines, each with its newline, then the empty line that ends it. */
static int append_doc(const char *s, size_t n, char **out, size_t *cap, size_t *len)
{
    size_t at = *len;
    if (TUPE_RESERVE(*out, *cap, at + n + 2))
        return -1;
    int any = 0;
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) : n;
        if (!blank(s, k)) {
            memcpy(*out + at, s, k);
            at += k;
            (*out)[at++] = '\n';
            any = 1;
        }
        s += k + (nl != NULL);
        n -= k + (nl != NULL);
    }
    if (any)
        (*out)[at++] = '\n';
    *len = at;
    return 0;
}

int tupe_jsonl_convert(const char *data, size_t len, const char *field, const char *name,
                       uint64_t first_line, char **out, size_t *cap, size_t *out_len,
                       tupe_err *e)
{
    *out_len = 0;
    uint64_t line = first_line;
    for (size_t i = 0; i < len; line++) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - data) - i : len - i;
        const char *s = data + i;
        i += n + 1;
        if (blank(s, n))
            continue;
        json_error_t je;
        json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
        if (!o)
            return tupe_fail_linecol(e, TUPE_EDATA, name, line, je.column > 0 ? (uint64_t)je.column : 1,
                                     "not JSON: %s", je.text);
        int rc = 0;
        json_t *v = json_object_get(o, field);
        if (!json_is_object(o))
            rc = tupe_fail_line(e, TUPE_EDATA, name, line, "expected a JSON object, found %s",
                                type_name(o));
        else if (!v)
            rc = tupe_fail_line(e, TUPE_EDATA, name, line, "no \"%s\" field (choose the field "
                                "with --field)", field);
        else if (!json_is_string(v))
            rc = tupe_fail_line(e, TUPE_EDATA, name, line, "\"%s\" is %s, not a string", field,
                                type_name(v));
        else if (append_doc(json_string_value(v), json_string_length(v), out, cap, out_len))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        json_decref(o);
        if (rc)
            return rc;
    }
    return 0;
}
