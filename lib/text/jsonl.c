#include "text/jsonl.h"

#include <jansson.h>
#include <string.h>

#include "base/grow.h"
#include "text/pretok.h"
#include "text/unicode.h"

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

/* The line with what is not UTF-8 replaced by U+FFFD (REPLACE) or left out (SKIP), as the
 * tokenizer does with plain text, in *fix. */
static int repair_utf8(const char *s, size_t n, int invalid, char **fix, size_t *cap, size_t *len)
{
    if (TUPE_RESERVE(*fix, *cap, 3 * n + 1))
        return -1;
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    size_t at = 0;
    while (p < end) {
        uint32_t cp;
        int k = tupe_utf8_decode(p, end, &cp);
        if (k > 0) {
            memcpy(*fix + at, p, (size_t)k);
            at += (size_t)k;
            p += k;
            continue;
        }
        if (invalid == TUPE_INVALID_REPLACE) {
            memcpy(*fix + at, "\xEF\xBF\xBD", 3);
            at += 3;
        }
        p += -k;
    }
    *len = at;
    return 0;
}

/* The line with every number outside a string replaced by 0: JSON allows numbers that jansson
 * cannot hold (an id above 2^63, 1e400), and a field the corpus ignores must not refuse the
 * line. Strings, the text among them, are copied as they are. */
static int zero_numbers(const char *s, size_t n, char **fix, size_t *cap, size_t *len)
{
    if (TUPE_RESERVE(*fix, *cap, n + 1))
        return -1;
    size_t at = 0;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            (*fix)[at++] = c;
            if (c == '\\' && i + 1 < n)
                (*fix)[at++] = s[++i];
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
            (*fix)[at++] = c;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            while (i + 1 < n && strchr("+-.eE0123456789", s[i + 1]))
                i++;
            (*fix)[at++] = '0';
        } else {
            (*fix)[at++] = c;
        }
    }
    *len = at;
    return 0;
}

int tupe_jsonl_convert(const char *data, size_t len, const char *field, const char *name,
                       uint64_t first_line, uint64_t first_byte, int invalid, char **out,
                       size_t *cap, size_t *out_len, tupe_err *e)
{
    *out_len = 0;
    uint64_t line = first_line;
    char *fix = NULL, *fix2 = NULL;
    size_t fcap = 0, fcap2 = 0;
    int rc = 0;
    for (size_t i = 0; i < len && !rc; line++) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - data) - i : len - i;
        const char *s = data + i;
        size_t at = i;
        i += n + 1;
        if (blank(s, n))
            continue;
        /* Bytes that are not UTF-8: tupe(7)'s answer, or --invalid's. */
        size_t bad = tupe_utf8_first_bad(s, n);
        if (bad < n && invalid == TUPE_INVALID_ERROR) {
            rc = tupe_fail_byte(e, TUPE_EDATA, name, first_byte + at + bad,
                                "invalid UTF-8 (see --invalid)");
            break;
        }
        if (bad < n) {
            if (repair_utf8(s, n, invalid, &fix, &fcap, &n)) {
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                break;
            }
            s = fix;
        }
        /* JSON allows \u0000 in any string: accepted in the fields a corpus ignores, refused
         * in the text (below) in tupe's words rather than jansson's. */
        json_error_t je;
        json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!o && (strstr(je.text, "overflow") || strstr(je.text, "too big"))) {
            size_t n2;
            if (zero_numbers(s, n, &fix2, &fcap2, &n2)) {
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                break;
            }
            json_error_t je2;
            o = json_loadb(fix2, n2, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je2);
        }
        if (!o) {
            rc = tupe_fail_linecol(e, TUPE_EDATA, name, line, je.column > 0 ? (uint64_t)je.column : 1,
                                   "not JSON: %s", je.text);
            break;
        }
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
        else if (memchr(json_string_value(v), 0, json_string_length(v)))
            rc = tupe_fail_line(e, TUPE_EDATA, name, line, "\"%s\" holds a NUL character "
                                "(\\u0000): not text", field);
        else if (append_doc(json_string_value(v), json_string_length(v), out, cap, out_len))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        json_decref(o);
    }
    free(fix);
    free(fix2);
    return rc;
}
