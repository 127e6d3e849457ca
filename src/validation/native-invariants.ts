import type { InvariantEnv, InvariantResult } from './invariants';
import type { Constraint } from './model';

/**
 * The invariants every element or every resource carries, answered without FHIRPath: evaluating
 * `ext-1` on each of a resource's extensions through the FHIRPath engine would cost more than the
 * rest of its validation. Each is used only when the constraint's expression is the R4 one, so a
 * profile that reuses a key with its own expression still gets it evaluated.
 */

/** Answers the invariant, or undefined to leave it to the FHIRPath engine. */
type Native = (focus: Record<string, unknown>, env: InvariantEnv) => InvariantResult | undefined;

const OK: InvariantResult = { ok: true };
const FAIL: InvariantResult = { ok: false };

const NATIVE: Record<string, { expression: string; check: Native }> = {
  'ext-1': {
    expression: 'extension.exists() != value.exists()',
    check: (focus) => {
      let value = false;
      for (const key in focus) if (key.startsWith('value') || key.startsWith('_value')) value = true;
      return (focus.extension !== undefined) !== value ? OK : FAIL;
    },
  },
  // Checked by the walker for each contained resource, with the contained resource's path.
  'dom-2': { expression: 'contained.contained.empty()', check: () => OK },
  'dom-4': { expression: 'contained.meta.versionId.empty() and contained.meta.lastUpdated.empty()', check: () => OK },
  'dom-5': { expression: 'contained.meta.security.empty()', check: () => OK },
  // Checked once the whole resource has been walked and every `#id` reference seen.
  'dom-3': { expression: '', check: () => OK },
  'dom-6': {
    expression: 'text.`div`.exists()',
    // A contained resource need not carry its own narrative: the container's covers it.
    check: (focus, env) => {
      if (env.resource !== env.rootResource) return OK;
      const text = focus.text as { div?: unknown } | undefined;
      return typeof text?.div === 'string' ? OK : FAIL;
    },
  },
  // Checked by the walker where it reads the reference, against the root resource's contained ids.
  'ref-1': { expression: '', check: () => OK },
  // On Narrative.div (the focus is the Narrative). R4's XPath: some non-whitespace text, or an image.
  'txt-2': {
    expression: 'htmlChecks()',
    check: (focus) => (typeof focus.div !== 'string' || hasContent(focus.div) ? OK : FAIL),
  },
  // An empty narrative is txt-2's finding; txt-1 (the allowed elements) goes to the engine otherwise.
  'txt-1': {
    expression: 'htmlChecks()',
    check: (focus) => (typeof focus.div === 'string' && !hasContent(focus.div) ? OK : undefined),
  },
};

/** Some text outside the tags that is not whitespace (`&nbsp;` is whitespace), or an image with a source. */
function hasContent(div: string): boolean {
  let inTag = false;
  for (let i = 0; i < div.length; i++) {
    const c = div.charCodeAt(i);
    if (inTag) {
      if (c === 62) inTag = false;
      continue;
    }
    if (c === 60) {
      if (/^<img\s[^>]*src=/i.test(div.slice(i, i + 200))) return true;
      inTag = true;
      continue;
    }
    if (c === 32 || c === 9 || c === 10 || c === 13 || c === 160) continue;
    if (c === 38 && (div.startsWith('&nbsp;', i) || div.startsWith('&#160;', i))) {
      i += 5;
      continue;
    }
    return true;
  }
  return false;
}

export function nativeInvariant(constraint: Constraint): Native | undefined {
  const native = NATIVE[constraint.key];
  if (!native) return undefined;
  if (native.expression !== '' && native.expression !== constraint.expression) return undefined;
  if (native.expression === '' && !constraint.expression.startsWith(R4_PREFIX[constraint.key] ?? '\u0000'))
    return undefined;
  return native.check;
}

/** dom-3 and ref-1 are long; their R4 forms are known by how they start. */
const R4_PREFIX: Record<string, string> = {
  'dom-3': "contained.where((('#'+id in (%resource.descendants().reference",
  'ref-1':
    "reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids'))",
};
