// The C library of the platform, chosen once for every target: a file that makes system calls
// imports Platform instead of repeating this choice.
#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Musl)
@_exported import Musl
#elseif canImport(Darwin)
@_exported import Darwin
#else
#error("registry needs Glibc, Musl or Darwin")
#endif
