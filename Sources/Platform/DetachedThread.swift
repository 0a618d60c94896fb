#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts a detached POSIX thread with a name of its own, for the background work of big
/// tables (``BackgroundPopulation``, ``GradualRelease``): each runs once, briefly or slowly, and
/// nobody waits for it.
public enum DetachedThread {
    /// Runs `body` on a new detached thread named `name` (as `top -H`, `perf` and `/proc` show
    /// it); false, without running `body`, when no thread could be created.
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(DetachedThreadBody(name: name, run: body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            let body = Unmanaged<DetachedThreadBody>.fromOpaque(context!).takeRetainedValue()
            DetachedThread.nameThisThread(body.name)
            body.run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<DetachedThreadBody>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    /// Names the calling thread (pthread_setname_np is not visible to Swift): a thread otherwise
    /// keeps the name of the one that created it.
    fileprivate static func nameThisThread(_ name: String) {
        #if os(Linux)
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = name.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
        #endif
    }
}

/// What a ``DetachedThread`` runs, handed to the new thread as its context.
private final class DetachedThreadBody: Sendable {
    let name: String
    let run: @Sendable () -> Void

    init(name: String, run: @escaping @Sendable () -> Void) {
        self.name = name
        self.run = run
    }
}
