import Foundation
import PackagePlugin

/// Writes the git revision the package is built from into the target, as `gitRevision`, before
/// every build ("unknown" outside a git checkout). The file is rewritten only when the revision
/// changed, so an unchanged revision recompiles nothing.
@main
struct GitRevisionPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("generated")
        let script = """
            mkdir -p "$1" || exit 1
            revision=$(git -C "$2" rev-parse --short=12 HEAD 2>/dev/null) || revision=unknown
            if [ "$revision" != unknown ] && ! git -C "$2" diff --quiet HEAD -- 2>/dev/null; then revision="$revision+changes"; fi
            printf '/// The git revision this build was made from.\\nlet gitRevision = "%s"\\n' "$revision" > "$1/GitRevision.swift.new"
            if cmp -s "$1/GitRevision.swift.new" "$1/GitRevision.swift"; then rm "$1/GitRevision.swift.new"; else mv "$1/GitRevision.swift.new" "$1/GitRevision.swift"; fi
            """
        return [
            .prebuildCommand(
                displayName: "Recording the git revision",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "git-revision", output.path, context.package.directoryURL.path],
                outputFilesDirectory: output)
        ]
    }
}
