/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing
 * (TensorBoard event files). Debian packages no C library that provides it (zlib's crc32 is
 * the other polynomial), so it is a byte-wise table here, checked against RFC 3720's vectors.
 *
 * tupe_crc32c_masked is TFRecord's form: rotated right by 15 bits plus 0xa282ead8, so that a
 * CRC of data holding CRCs does not degenerate. */
#ifndef TUPE_CRC32C_H
#define TUPE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of data[0..n) continuing from crc (0 to start). */
uint32_t tupe_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t tupe_crc32c_masked(const void *data, size_t n);

#endif
