// What the MMKV importer (PrefsKVMMKV) takes from system libraries: AES in CFB-128 mode from OpenSSL's
// libcrypto (MMKV's encryption) and zlib's CRC-32 (MMKV's checksum).
#include <openssl/evp.h>
#include <zlib.h>
