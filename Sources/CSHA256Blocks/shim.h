// SHA-256's block function from BoringSSL, as swift-crypto vendors it (its CCryptoBoringSSL
// target, whose symbols carry that prefix). No library of its own: every binary that links
// swift-crypto's Crypto links this function too. Its declaration in BoringSSL:
// include/CCryptoBoringSSL_sha2.h, SHA256_TransformBlocks ("|num_blocks| * SHA256_CBLOCK bytes of
// data ... update |state|"). It runs the CPU's SHA extensions where it has them.
#ifndef CSHA256BLOCKS_SHIM_H
#define CSHA256BLOCKS_SHIM_H
#include <stddef.h>
#include <stdint.h>

void CCryptoBoringSSL_SHA256_TransformBlocks(uint32_t state[8], const uint8_t *data, size_t num_blocks);

#endif
