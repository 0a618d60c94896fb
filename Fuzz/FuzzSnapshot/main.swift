import RegistryFuzzing

/// libFuzzer's entry point (built with `swift build --sanitize=fuzzer`, see scripts/fuzz.sh);
/// a plain build makes a program that does nothing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSnapshot(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    FuzzBodies.snapshot(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
