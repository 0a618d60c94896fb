import Foundation
import RegistryVersion

/// The revision the report names: `$REGISTRYLOAD_GIT_REVISION` when set (to name the revision of
/// the server under test, when it differs), otherwise the revision registryload was built from.
enum GitRevision {
    static func current() -> String {
        if let given = ProcessInfo.processInfo.environment["REGISTRYLOAD_GIT_REVISION"], !given.isEmpty { return given }
        return BuildVersion.revision
    }
}
