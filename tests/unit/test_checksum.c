/* XXH3-64 against the published vectors of xxHash's own self-test (xxhsum's sanity check:
 * a buffer filled by byte = (gen >> 56), gen *= PRIME64, gen starting at PRIME32). */
#include "base/checksum.h"
#include "base/crc32c.h"
#include "unit.h"

#define PRIME32 2654435761U
#define PRIME64 11400714785074694797ULL

static unsigned char sanity[4096];

static void fill(void)
{
    uint64_t g = PRIME32;
    for (size_t i = 0; i < sizeof sanity; i++) {
        sanity[i] = (unsigned char)(g >> 56);
        g *= PRIME64;
    }
}

static const struct { size_t len; uint64_t seed, want; } vec[] = {
    {0, 0, 0x2D06800538D394C2ULL},     {0, PRIME64, 0xA8A6B918B2F0364AULL},
    {1, 0, 0xC44BDFF4074EECDBULL},     {1, PRIME64, 0x032BE332DD766EF8ULL},
    {6, 0, 0x27B56A84CD2D7325ULL},     {12, 0, 0xA713DAF0DFBB77E7ULL},
    {24, 0, 0xA3FE70BF9D3510EBULL},    {48, 0, 0x397DA259ECBA1F11ULL},
    {80, 0, 0xBCDEFBBB2C47C90AULL},    {195, 0, 0xCD94217EE362EC3AULL},
    {403, 0, 0xCDEB804D65C6DEA4ULL},   {512, 0, 0x617E49599013CB6BULL},
    {2048, 0, 0xDD59E2C3A5F038E0ULL},  {2240, 0, 0x6E73A90539CF2948ULL},
    {2367, 0, 0xCB37AEB9E5D361EDULL},  {2367, PRIME64, 0xD2DB3415B942B42AULL},
};

static void published_vectors(void)
{
    fill();
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        uint64_t h = vec[i].seed ? tupe_hash64_seed(sanity, vec[i].len, vec[i].seed)
                                 : tupe_hash64(vec[i].len ? sanity : NULL, vec[i].len);
        CHECK_MSG(h == vec[i].want, "len %zu seed %llx: got %016llx want %016llx", vec[i].len,
                  (unsigned long long)vec[i].seed, (unsigned long long)h,
                  (unsigned long long)vec[i].want);
    }
}

static void streaming_matches_one_shot(void)
{
    fill();
    tupe_hasher *h = tupe_hasher_new();
    CHECK(h != NULL);
    for (size_t len = 0; len <= 2367; len += 97) {
        tupe_hasher_reset(h);
        for (size_t p = 0; p < len;) {
            size_t k = (p * 31 + 7) % 113 + 1;
            if (k > len - p)
                k = len - p;
            tupe_hasher_update(h, sanity + p, k);
            p += k;
        }
        CHECK_U64(tupe_hasher_digest(h), tupe_hash64(sanity, len));
    }
    tupe_hasher_free(h);
}

static void hex_round_trip(void)
{
    char hex[22];
    tupe_hash_hex(0x0123456789abcdefULL, hex);
    CHECK_STR(hex, "xxh3:0123456789abcdef");
    uint64_t v = 0;
    CHECK_INT(tupe_hash_parse(hex, &v), 0);
    CHECK_U64(v, 0x0123456789abcdefULL);
    CHECK_INT(tupe_hash_parse("FEDCBA9876543210", &v), 0);
    CHECK_U64(v, 0xfedcba9876543210ULL);
    CHECK_INT(tupe_hash_parse("xxh3:0123", &v), -1);
    CHECK_INT(tupe_hash_parse("xxh3:0123456789abcdeg", &v), -1);
}

static void detects_single_bit_flips(void)
{
    fill();
    uint64_t ref = tupe_hash64(sanity, 1000);
    for (size_t i = 0; i < 1000 * 8; i += 13) {
        sanity[i / 8] ^= (unsigned char)(1u << (i % 8));
        CHECK(tupe_hash64(sanity, 1000) != ref);
        sanity[i / 8] ^= (unsigned char)(1u << (i % 8));
    }
}

/* RFC 3720 (iSCSI) B.4 vectors and the classic check value; TFRecord's masking. */
static void crc32c_vectors(void)
{
    uint8_t b[32];
    CHECK_U64(tupe_crc32c(0, "123456789", 9), 0xE3069283u);
    memset(b, 0, sizeof b);
    CHECK_U64(tupe_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xFF, sizeof b);
    CHECK_U64(tupe_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    CHECK_U64(tupe_crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    CHECK_U64(tupe_crc32c(0, b, 32), 0x113FDB5Cu);
    CHECK_U64(tupe_crc32c(tupe_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    uint32_t c = 0xE3069283u;
    CHECK_U64(tupe_crc32c_masked("123456789", 9), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

UNIT_MAIN(T(crc32c_vectors), T(published_vectors), T(streaming_matches_one_shot), T(hex_round_trip),
          T(detects_single_bit_flips))
