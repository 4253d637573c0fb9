import Testing

@testable import IngestKit

/// Whether `pattern` matches the card path `path` (written as UTF-8 text).
private func globMatches(_ pattern: String, _ path: String) throws -> Bool {
    try Glob(pattern).matches(CardPath(path))
}

@Suite struct GlobTests {
    // MARK: `*`

    @Test func starMatchesAnyRunWithinOneName() throws {
        #expect(try globMatches("*.JPG", "IMG_0001.JPG"))
        #expect(try globMatches("IMG_*.JPG", "IMG_0001.JPG"))
        #expect(try !globMatches("*.JPG", "IMG_0001.MOV"))
    }

    @Test func starMatchesAnEmptyRun() throws {
        #expect(try globMatches("IMG*.JPG", "IMG.JPG"))
        #expect(try globMatches("*", "a"))
    }

    @Test func starDoesNotCrossASlash() throws {
        #expect(try globMatches("DCIM/*.JPG", "DCIM/IMG_0001.JPG"))
        #expect(try !globMatches("DCIM/*.JPG", "DCIM/100CANON/IMG_0001.JPG"))
        #expect(try !globMatches("DCIM*", "DCIM/IMG_0001.JPG"))
    }

    // MARK: `?`

    @Test func questionMarkMatchesExactlyOneCharacter() throws {
        #expect(try globMatches("IMG_000?.JPG", "IMG_0001.JPG"))
        #expect(try !globMatches("IMG_000?.JPG", "IMG_000.JPG"))
        #expect(try !globMatches("IMG_000?.JPG", "IMG_00012.JPG"))
    }

    @Test func questionMarkDoesNotMatchASlash() throws {
        #expect(try !globMatches("DCIM?100CANON", "DCIM/100CANON"))
    }

    /// The documentation promises "`?` one character": é is one character (two UTF-8 bytes).
    @Test func questionMarkMatchesOneNonASCIICharacter() throws {
        #expect(try globMatches("Caf?.jpg", "Café.jpg"))
    }

    // MARK: `[...]`

    @Test func bracketRangeMatchesOneCharacterInTheRange() throws {
        #expect(try globMatches("IMG_[0-4]*.JPG", "IMG_3000.JPG"))
        #expect(try !globMatches("IMG_[0-4]*.JPG", "IMG_5000.JPG"))
        #expect(try globMatches("[a-z]*.mov", "clip.mov"))
        #expect(try !globMatches("[a-z]*.mov", "_clip.mov"))
    }

    @Test func bracketListMatchesAnyListedCharacter() throws {
        #expect(try globMatches("*.[jt]pg", "a.jpg"))
        #expect(try globMatches("*.[jt]pg", "a.tpg"))
        #expect(try !globMatches("*.[jt]pg", "a.xpg"))
    }

    @Test func bracketWithExclamationMatchesAnyCharacterNotListed() throws {
        #expect(try globMatches("[!_]*", "IMG_0001.JPG"))
        #expect(try !globMatches("[!_]*", "_IMG_0001.JPG"))
        #expect(try !globMatches("[!x]", "x"))
        #expect(try globMatches("[!x]", "y"))
    }

    @Test func bracketWithCaretIsAlsoNegation() throws {
        #expect(try !globMatches("[^_]*", "_IMG.JPG"))
        #expect(try globMatches("[^_]*", "IMG.JPG"))
    }

    @Test func closingBracketFirstInSetIsALiteral() throws {
        #expect(try globMatches("[]a]", "]"))
        #expect(try globMatches("[]a]", "a"))
        #expect(try !globMatches("[]a]", "b"))
    }

    @Test func hyphenAtEndOfSetIsALiteral() throws {
        #expect(try globMatches("a[x-]b", "a-b"))
        #expect(try globMatches("a[x-]b", "axb"))
        #expect(try !globMatches("a[x-]b", "ayb"))
    }

    /// Inside a set, `[` is an ordinary character (POSIX; bash's `[[ "[x]" == [[]* ]]` holds):
    /// `[[]` is the way to match a literal `[`, since patterns have no escape character.
    @Test func bracketSetCanHoldAnOpeningBracket() throws {
        #expect(try globMatches("[[]*", "[draft] IMG_0001.JPG"))
        #expect(try !globMatches("[[]*", "IMG_0001.JPG"))
    }

    @Test func bracketDoesNotMatchASlash() throws {
        #expect(try !globMatches("DCIM[/]100", "DCIM/100"))
        #expect(try !globMatches("DCIM[!a]100", "DCIM/100"))
    }

    // MARK: `**`

    @Test func doubleStarSlashMatchesAnyNumberOfDirectoriesIncludingNone() throws {
        #expect(try globMatches("**/*.JPG", "IMG.JPG"))
        #expect(try globMatches("**/*.JPG", "DCIM/IMG.JPG"))
        #expect(try globMatches("**/*.JPG", "DCIM/100CANON/IMG.JPG"))
        #expect(try !globMatches("**/*.JPG", "DCIM/100CANON/IMG.MOV"))
    }

    @Test func dcimDoubleStarPatternMatchesPhotosAtAnyDepthBelowDCIM() throws {
        let pattern = "DCIM/**/*.JPG"
        #expect(try globMatches(pattern, "DCIM/IMG_0001.JPG"))
        #expect(try globMatches(pattern, "DCIM/100CANON/IMG_0001.JPG"))
        #expect(try globMatches(pattern, "DCIM/100CANON/deeper/IMG_0001.JPG"))
        #expect(try !globMatches(pattern, "MISC/IMG_0001.JPG"))
        #expect(try !globMatches(pattern, "XDCIM/100CANON/IMG_0001.JPG"))
        #expect(try !globMatches(pattern, "BACKUP/DCIM/100CANON/IMG_0001.JPG"))
        #expect(try !globMatches(pattern, "DCIM/100CANON/IMG_0001.CR3"))
    }

    @Test func trailingDoubleStarMatchesEverythingBelowTheDirectory() throws {
        #expect(try globMatches("DCIM/**", "DCIM/100CANON/IMG_0001.JPG"))
        #expect(try globMatches("DCIM/**", "DCIM/IMG_0001.JPG"))
        #expect(try !globMatches("DCIM/**", "PRIVATE/M4ROOT/CLIP/C0001.MP4"))
    }

    // MARK: names and paths

    @Test func patternWithoutSlashMatchesNameAtAnyDepth() throws {
        #expect(try globMatches("*.tmp", "x.tmp"))
        #expect(try globMatches("*.tmp", "DCIM/100CANON/x.tmp"))
        #expect(try globMatches("MISC", "MISC"))
        #expect(try globMatches("MISC", "DCIM/MISC"))
    }

    @Test func patternWithoutSlashMatchesOnlyTheLastName() throws {
        #expect(try !globMatches("MISC", "MISC/info.xml"))
        #expect(try !globMatches("DCIM", "DCIM/100CANON"))
    }

    @Test func patternWithSlashMatchesTheWholePathFromTheRoot() throws {
        #expect(try globMatches("DCIM/100CANON", "DCIM/100CANON"))
        #expect(try !globMatches("DCIM/100CANON", "BACKUP/DCIM/100CANON"))
        #expect(try !globMatches("DCIM/100CANON", "DCIM/100CANON/IMG_0001.JPG"))
    }

    @Test func leadingSlashAnchorsAtTheRoot() throws {
        #expect(try globMatches("/MISC", "MISC"))
        #expect(try !globMatches("/MISC", "DCIM/MISC"))
        #expect(try globMatches("/*.tmp", "x.tmp"))
        #expect(try !globMatches("/*.tmp", "DCIM/x.tmp"))
    }

    @Test func leadingSlashIsKeptInThePatternText() throws {
        #expect(try Glob("/MISC").pattern == "/MISC")
        #expect(try Glob("/MISC").description == "/MISC")
    }

    // MARK: case

    @Test func lettersMatchRegardlessOfCase() throws {
        #expect(try globMatches("*.jpg", "IMG_0001.JPG"))
        #expect(try globMatches("*.JPG", "img_0001.jpg"))
        #expect(try globMatches("DCIM/**/*.JPG", "dcim/100canon/img_0001.jpg"))
        #expect(try globMatches("misc", "MISC"))
    }

    @Test func bracketSetsMatchRegardlessOfCase() throws {
        #expect(try globMatches("[a-c]*", "B.JPG"))
        #expect(try globMatches("[A-C]*", "b.jpg"))
        #expect(try !globMatches("[!x]*", "X.JPG"))
    }

    @Test func caseFoldingDoesNotTurnPunctuationIntoLetters() throws {
        // '[' + 32 would be '{': folding must touch only A–Z.
        #expect(try !globMatches("{", "["))
        #expect(try !globMatches("@", "`"))
    }

    // MARK: errors

    @Test func unbalancedBracketIsAnError() throws {
        let error = #expect(throws: GlobError.self) { try Glob("*.[jJ") }
        #expect(error?.pattern == "*.[jJ")
        #expect(error?.description.contains("*.[jJ") == true)
        #expect(error?.description.contains("[") == true)
    }

    @Test func emptyPatternIsAnError() throws {
        let error = #expect(throws: GlobError.self) { try Glob("") }
        #expect(error?.pattern == "")
        #expect(error?.problem.contains("empty") == true)
    }

    @Test func balancedBracketsAreAccepted() throws {
        _ = try Glob("[a-z][!0-9]*.[jt]pg")
    }
}
