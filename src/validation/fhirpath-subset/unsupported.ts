/** Thrown where an expression leaves the subset: the caller falls back to the full FHIRPath engine. */
export class Unsupported extends Error {}
