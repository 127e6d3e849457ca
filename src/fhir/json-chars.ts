/**
 * The structural characters of JSON (as char codes, which are also their UTF-8 bytes: they are
 * ASCII), for scanners that find where values end without parsing them.
 */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const COLON = 0x3a;
export const COMMA = 0x2c;

/** Whether the character at `at` of a JSON text is escaped: preceded by an odd number of backslashes. */
export function escapedAt(text: string, at: number): boolean {
  let backslashes = 0;
  for (let j = at - 1; j >= 0 && text.charCodeAt(j) === BACKSLASH; j--) backslashes++;
  return backslashes % 2 === 1;
}
