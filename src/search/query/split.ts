/**
 * Search values as written: commas separate alternatives, and a backslash escapes a `,`, `|`, `$`
 * or backslash that is part of a value (R4 search.html#escaping).
 */

/** Values of one parameter occurrence: split on commas that are not escaped (other escapes stay). */
export function splitValues(raw: string): string[] {
  return splitOn(raw, ',');
}

/** Splits on `separator` where it is not escaped with `\`; escapes are kept in the parts. */
export function splitOn(raw: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i];
    if (ch === '\\' && i + 1 < raw.length) {
      current += ch + raw[i + 1];
      i++;
    } else if (ch === separator) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts;
}

/** Splits on `separator` where it is not escaped, and removes the escapes of , | $ and \ from the parts. */
export function splitEscaped(raw: string, separator: string): string[] {
  return splitOn(raw, separator).map(unescapeValue);
}

export function unescapeValue(text: string): string {
  return text.replace(/\\([,|$\\])/g, '$1');
}
