#include <protobuf-c/protobuf-c.h>

/// The shared empty string protobuf-c leaves in string fields that a message does not carry
/// (Swift does not import an `extern` array of unknown size).
static inline const char *registry_protobuf_c_empty_string(void) { return protobuf_c_empty_string; }
