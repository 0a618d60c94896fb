import Foundation

/// `registryctl watch ARGUMENTS` in the background, its output in a file: started, and waited for
/// until its stream is open (it has printed its starting cursor, which `--progress` makes it
/// print), then read whole once it exits by itself (its `--count`) or 20 s passed.
struct BackgroundWatch {
    private let process = Process()
    private let output: OutputFiles

    /// Starts the watch and waits (up to 30 s) for its first line; throws ``NotWatching`` when
    /// none came. `arguments` must hold
    /// `--progress`: a watch from now misses what happens before its stream opens, and the
    /// starting cursor is what says it has.
    init(_ arguments: [String]) throws {
        precondition(arguments.contains("--progress"), "a background watch needs --progress, to say when it is watching")
        process.executableURL = URL(fileURLWithPath: Binaries.path("registryctl"))
        process.arguments = ["watch"] + arguments
        output = OutputFiles(for: process)
        try process.run()
        guard output.waitForFirstLine(of: process, timeout: 30) else {
            if process.isRunning { end(process, grace: 5) }
            let printed = output.stdout + output.stderr
            output.remove()
            throw NotWatching(output: printed)
        }
    }

    /// The watch printed nothing for 30 s, or exited first; `output` is what it printed, errors
    /// included.
    struct NotWatching: Error {
        let output: String
    }

    /// Waits for the watch to end (stopping it after 20 s); its exit status and output lines.
    func finish() -> (status: Int32, lines: [Substring]) {
        if !waitForExit(of: process, timeout: 20) { end(process, grace: 5) }
        process.waitUntilExit()
        let lines = output.stdout.split(separator: "\n")
        output.remove()
        return (process.terminationStatus, lines)
    }
}
