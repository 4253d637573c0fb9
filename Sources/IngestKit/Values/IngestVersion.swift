/// This build's version: `ingest --version`, and the tool named in every ASC MHL manifest.
public enum IngestVersion {
    public static let number = "0.1.0"
}
