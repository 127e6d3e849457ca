import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as FhirPath from 'fhirpath';

/**
 * HL7's FHIRPath engine for JS with the R4 model, loaded once on first use (its grammar and UCUM
 * tables cost start-up time nobody should pay for a server that never evaluates FHIRPath). This
 * is the one place that loads the `fhirpath` package: engine.ts compiles with it in-process, the
 * pool's workers (worker.ts, in their own threads) load it through here too, and the small
 * invariant evaluator reads the model alone.
 */

export interface FhirPathEngine {
  fhirpath: typeof FhirPath;
  model: FhirPath.Model;
}

/** A node of the engine's own type (what its functions answer), holding its JSON. */
export interface ResNode {
  data: unknown;
}

/** The engine's node type; `makeResNode` takes more positions, left unset (null) here. */
export interface ResourceNodeType {
  makeResNode(ctx: unknown, data: unknown, ...unset: null[]): ResNode;
}

const require = createRequire(import.meta.url);
let engine: FhirPathEngine | undefined;
let resourceNode: ResourceNodeType | undefined;

/** The R4 model alone (without the engine's grammar). */
export function fhirpathModel(): FhirPath.Model {
  return require('fhirpath/fhir-context/r4') as FhirPath.Model;
}

export function fhirpathEngine(): FhirPathEngine {
  engine ??= { fhirpath: require('fhirpath') as typeof FhirPath, model: fhirpathModel() };
  return engine;
}

/** The engine's node type, so that what a user function answers is typed (`resolve() is Practitioner`). */
export function fhirpathResourceNode(): ResourceNodeType {
  resourceNode ??= (
    require(join(dirname(require.resolve('fhirpath')), 'types.js')) as { ResourceNode: ResourceNodeType }
  ).ResourceNode;
  return resourceNode;
}
