/**
 * The `filter` parameter of $expand: a concept matches when a word of its code, display or a
 * designation starts with one of the filter's words (case-insensitive), so "data" finds
 * "Data Exchange" and "exch" finds it too.
 */
export class TextFilter {
  private readonly words: string[];

  constructor(readonly text: string | undefined) {
    this.words = text ? wordsOf(text) : [];
  }

  get isEmpty(): boolean {
    return this.words.length === 0;
  }

  passes(...values: (string | undefined)[]): boolean {
    if (this.isEmpty) return true;
    for (const value of values) {
      if (!value) continue;
      for (const word of wordsOf(value)) if (this.words.some((w) => word.startsWith(w))) return true;
    }
    return false;
  }
}

function wordsOf(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w !== '');
}
