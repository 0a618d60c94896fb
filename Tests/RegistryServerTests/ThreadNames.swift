import Platform

#if os(Linux)
/// The calling thread's name, as `/proc/thread-self/comm` gives it.
func nameOfThisThread() -> String {
    readName("/proc/thread-self/comm") ?? ""
}

/// The names of this process's threads, as `/proc/self/task/*/comm` gives them.
func threadNamesOfThisProcess() -> [String] {
    guard let tasks = opendir("/proc/self/task") else { return [] }
    defer { closedir(tasks) }
    var names = [String]()
    while let entry = readdir(tasks) {
        let tid = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if let name = readName("/proc/self/task/\(tid)/comm") { names.append(name) }
    }
    return names
}

/// The first line of a `comm` file, without its newline; nil when it cannot be read.
private func readName(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 64)
    guard fgets(&buffer, 64, file) != nil else { return nil }
    let bytes = buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
#endif
