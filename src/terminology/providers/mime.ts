import type { BuiltInTerminology } from './registry';
import { BuiltInProvider, describe, type BuiltInConcept } from './base';

/**
 * MIME types (`urn:ietf:bcp:13`): any media type of a registered top-level type with a
 * subtype, and parameters, written as RFC 6838 and RFC 2045 allow (`text/plain;charset=UTF-8`).
 * A grammar, not a list: nothing to enumerate. The display is the code itself.
 */

export const MIME_TYPES = 'urn:ietf:bcp:13';
const TOP_LEVEL = new Set([
  'application',
  'audio',
  'example',
  'font',
  'haptics',
  'image',
  'message',
  'model',
  'multipart',
  'text',
  'video',
]);
const NAME = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;
const PARAMETER = /^\s*[A-Za-z0-9!#$&^_.+-]+=("[^"]*"|[A-Za-z0-9!#$&^_.+-]+)\s*$/;

class MimeTypeProvider extends BuiltInProvider {
  readonly enumerable = false;

  locate(code: string): BuiltInConcept | undefined {
    const [type, ...parameters] = code.split(';');
    const [top, sub, ...rest] = type.trim().split('/');
    if (rest.length > 0 || !sub || !TOP_LEVEL.has(top.toLowerCase()) || !NAME.test(sub)) return undefined;
    if (!parameters.every((p) => PARAMETER.test(p))) return undefined;
    return { code, display: code };
  }
}

export const mimeTypes: BuiltInTerminology = {
  resource: describe({ url: MIME_TYPES, name: 'MimeTypes', title: 'Mime Types', caseSensitive: false }),
  create() {
    return new MimeTypeProvider(this.resource);
  },
};
