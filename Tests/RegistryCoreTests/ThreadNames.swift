#if canImport(Glibc)
import Glibc
#endif

#if os(Linux)
/// The names of this process's threads, as `/proc/self/task/*/comm` gives them.
func threadNamesOfThisProcess() -> [String] {
    guard let tasks = opendir("/proc/self/task") else { return [] }
    defer { closedir(tasks) }
    var names = [String]()
    while let entry = readdir(tasks) {
        let tid = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard let file = fopen("/proc/self/task/\(tid)/comm", "r") else { continue }
        var buffer = [CChar](repeating: 0, count: 64)
        if fgets(&buffer, 64, file) != nil {
            let bytes = buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }
            names.append(String(decoding: bytes, as: UTF8.self))
        }
        fclose(file)
    }
    return names
}
#endif
