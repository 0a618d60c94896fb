/// What `--version` prints for each of the registry's programs: the release and the git
/// revision the build was made from (`+changes` when the working tree differed from it).
public enum BuildVersion {
    /// The release version.
    public static let release = "0.1.0"
    /// The git revision of the build (written by GitRevisionPlugin).
    public static let revision = gitRevision

    /// `0.1.0 (git 1a2b3c4d5e6f)`.
    public static var description: String { "\(release) (git \(revision))" }
}
