/* UTF-8 decoding (replacement by maximal subparts, as Python and Rust do) and the character
 * tables of the `hf` profile on the characters whose treatment differs between references
 * (docs/data.md 1.4). */
#include "text/unicode.h"
#include "unit.h"

static int dec(const char *s, size_t n, uint32_t *cp)
{
    return tupe_utf8_decode((const uint8_t *)s, (const uint8_t *)s + n, cp);
}

static void utf8_decoding(void)
{
    uint32_t cp = 0;
    CHECK_INT(dec("A", 1, &cp), 1);
    CHECK_INT(cp, 'A');
    CHECK_INT(dec("\xc3\xa9", 2, &cp), 2);
    CHECK_INT(cp, 0xE9);
    CHECK_INT(dec("\xe2\x82\xac", 3, &cp), 3);
    CHECK_INT(cp, 0x20AC);
    CHECK_INT(dec("\xf0\x9f\x98\x80", 4, &cp), 4);
    CHECK_INT(cp, 0x1F600);
    /* ill-formed: the length of the maximal subpart, negated */
    CHECK_INT(dec("\x80", 1, &cp), -1);
    CHECK_INT(dec("\xc0\xaf", 2, &cp), -1);       /* overlong lead byte */
    CHECK_INT(dec("\xe0\x80\x80", 3, &cp), -1);   /* overlong: E0 needs A0..BF */
    CHECK_INT(dec("\xed\xa0\x80", 3, &cp), -1);   /* surrogate */
    CHECK_INT(dec("\xe2\x82", 2, &cp), -2);       /* truncated */
    CHECK_INT(dec("\xe2\x82x", 3, &cp), -2);
    CHECK_INT(dec("\xf0\x9f\x98", 3, &cp), -3);
    CHECK_INT(dec("\xf4\x90\x80\x80", 4, &cp), -1); /* above U+10FFFF */
    CHECK_INT(dec("\xff", 1, &cp), -1);
    uint8_t out[4];
    for (uint32_t c = 0; c < 0x110000; c += 97) {
        if (c >= 0xD800 && c < 0xE000)
            continue;
        int n = tupe_utf8_encode(c, out);
        uint32_t back = 0;
        CHECK_INT(tupe_utf8_decode(out, out + n, &back), n);
        CHECK_INT(back, c);
    }
    CHECK_INT(tupe_utf8_count("na\xc3\xafve", 6), 5);
}

static uint8_t flags(uint32_t cp) { return tupe_uni_get(cp)->flags; }

static const char *map(uint32_t cp, int which, size_t *len)
{
    static uint8_t tmp[TUPE_UNI_MAX_OUT];
    return (const char *)tupe_uni_mapped(cp, tupe_uni_get(cp), which, tmp, len);
}

static void hf_quirks(void)
{
    size_t n;
    /* ASCII symbols are punctuation; letters and digits are not */
    const char *punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    for (const char *p = punct; *p; p++)
        CHECK_MSG(flags((uint8_t)*p) & TUPE_UNI_PUNCT, "'%c' is punctuation", *p);
    CHECK_INT(flags('a') & TUPE_UNI_PUNCT, 0);
    CHECK(flags('\t') & TUPE_UNI_WS);
    CHECK(flags(0x01) & TUPE_UNI_DELETE);
    CHECK(flags(0x7F) & TUPE_UNI_DELETE);
    /* Co is removed as well as Cc and Cf */
    CHECK(flags(0xE000) & TUPE_UNI_DELETE);
    CHECK(flags(0xF0000) & TUPE_UNI_DELETE);
    CHECK(flags(0x200B) & TUPE_UNI_DELETE);
    CHECK(flags(0x00AD) & TUPE_UNI_DELETE);
    CHECK(flags(0xFFFD) & TUPE_UNI_DELETE);
    CHECK(flags(0x2028) & TUPE_UNI_WS);
    CHECK(flags(0x3000) & TUPE_UNI_WS);
    /* the CJK range typo: U+2B820..U+2B91F are not isolated, U+2B920 is */
    CHECK_INT(flags(0x2B820) & TUPE_UNI_ISOLATE, 0);
    CHECK(flags(0x2B920) & TUPE_UNI_ISOLATE);
    CHECK(flags(0x4E00) & TUPE_UNI_ISOLATE);
    CHECK_INT(flags(0xAC00) & TUPE_UNI_ISOLATE, 0); /* Hangul is not */
    /* Unicode 10 punctuation is not punctuation for HF */
    CHECK_INT(flags(0x2E45) & TUPE_UNI_PUNCT, 0);
    CHECK(flags(0x2E3B) & TUPE_UNI_PUNCT);
    /* lowercase: per character, no final sigma; KELVIN SIGN; dotted I keeps its dot */
    CHECK(map(0x03A3, TUPE_UNI_MAP_LOWER, &n) != NULL);
    CHECK(n == 2 && memcmp(map(0x03A3, TUPE_UNI_MAP_LOWER, &n), "\xcf\x83", 2) == 0);
    CHECK(map(0x212A, TUPE_UNI_MAP_LOWER, &n) && n == 1);
    CHECK(map(0x0130, TUPE_UNI_MAP_LOWER, &n) && n == 3);           /* i + U+0307 */
    CHECK(map(0x0130, TUPE_UNI_MAP_LOWER_STRIP, &n) && n == 1);     /* i */
    CHECK(map(0x00E9, TUPE_UNI_MAP_STRIP, &n) && n == 1 && *map(0xE9, TUPE_UNI_MAP_STRIP, &n) == 'e');
    CHECK(map(0x0301, TUPE_UNI_MAP_STRIP, &n) && n == 0);           /* Mn disappears */
    CHECK(map('a', TUPE_UNI_MAP_LOWER, &n) == NULL);                 /* itself */
    CHECK(map(0xAC01, TUPE_UNI_MAP_STRIP, &n) && n == 9);            /* Hangul: 3 jamo */
    CHECK(map(0xF900, TUPE_UNI_MAP_STRIP, &n) && n == 3);            /* compatibility ideograph */
    CHECK_INT(tupe_uni_ccc(0x0301), 230);
    CHECK_INT(tupe_uni_ccc(0x0316), 220);
    CHECK_INT(tupe_uni_ccc('a'), 0);
    CHECK(flags(0x1D16D) & TUPE_UNI_KEEPCCC);
}

UNIT_MAIN(T(utf8_decoding), T(hf_quirks))
