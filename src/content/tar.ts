/**
 * A small reader of tar archives (POSIX ustar, with the GNU long-name and pax path extensions npm
 * and common tools write), over an archive already in memory. It answers regular files only and
 * writes nothing to disk, so a hostile path (`../x`) is just a name. Anything that does not add
 * up (a damaged header, a file running past the end, no end-of-archive marker) is a TarError:
 * a truncated archive is refused, never read in part.
 */

export interface TarFile {
  /** The path as the archive names it, without a leading `./`. */
  path: string;
  data: Buffer;
}

export class TarError extends Error {}

const BLOCK = 512;

export function readTar(archive: Buffer): TarFile[] {
  const files: TarFile[] = [];
  let offset = 0;
  /** A name given by the entry before (GNU `L`, pax `path`), for the next file. */
  let pendingName: string | undefined;
  while (offset + BLOCK <= archive.length) {
    const header = archive.subarray(offset, offset + BLOCK);
    if (isZero(header)) return files;
    checkChecksum(header, offset);
    const size = readNumber(header, 124, 12, offset);
    const start = offset + BLOCK;
    const end = start + size;
    if (end > archive.length) {
      throw new TarError(
        `the archive is truncated: '${entryName(header)}' needs ${size} bytes, ${archive.length - start} are left`,
      );
    }
    const data = archive.subarray(start, end);
    const type = String.fromCharCode(header[156]);
    if (type === 'L') {
      pendingName = cString(data, 0, data.length);
    } else if (type === 'x') {
      pendingName = paxPath(data) ?? pendingName;
    } else {
      if (type === '0' || type === '\0' || type === '7') {
        files.push({ path: (pendingName ?? entryName(header)).replace(/^\.\//, ''), data });
      }
      pendingName = undefined;
    }
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  throw new TarError('the archive is truncated: it ends without the end-of-archive marker');
}

function entryName(header: Buffer): string {
  const name = cString(header, 0, 100);
  const ustar = header.toString('latin1', 257, 262) === 'ustar';
  const prefix = ustar ? cString(header, 345, 155) : '';
  return prefix ? `${prefix}/${name}` : name;
}

/** The header checksum: the sum of its bytes with the checksum field read as spaces. */
function checkChecksum(header: Buffer, offset: number): void {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i];
  if (readNumber(header, 148, 8, offset) !== sum)
    throw new TarError(`the archive is damaged: the header at byte ${offset} has a wrong checksum`);
}

/** An octal field, or the base-256 form (high bit set) some writers use for large sizes. */
function readNumber(header: Buffer, at: number, length: number, offset: number): number {
  if (header[at] & 0x80) {
    let value = header[at] & 0x7f;
    for (let i = at + 1; i < at + length; i++) value = value * 256 + header[i];
    return value;
  }
  const text = cString(header, at, length).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text))
    throw new TarError(`the archive is damaged: the header at byte ${offset} has a malformed number`);
  return parseInt(text, 8);
}

function cString(buffer: Buffer, at: number, length: number): string {
  const end = buffer.indexOf(0, at);
  return buffer.toString('utf8', at, end < 0 || end > at + length ? at + length : end);
}

/** The `path` record of a pax extended header (`<length> path=<value>\n` records). */
function paxPath(data: Buffer): string | undefined {
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const length = Number(data.toString('latin1', at, space));
    if (!Number.isInteger(length) || length <= 0) break;
    const record = data.toString('utf8', space + 1, at + length - 1);
    if (record.startsWith('path=')) return record.slice('path='.length);
    at += length;
  }
  return undefined;
}

function isZero(block: Buffer): boolean {
  for (let i = 0; i < block.length; i++) if (block[i] !== 0) return false;
  return true;
}
