import type { CodeableConcept, CodeSystem, Coding, ValueSet } from 'fhir/r4';
import { addToPath, outcomeOf, TerminologyError, txIssue } from './issues';
import { Pacer } from './pacing';
import type { TxParams } from './params';
import type { Resolver } from './resolver';
import { ValueSetChecker } from './membership/checker';
import type { CodedMode, ValidationEnv, ValidationResult } from './membership/state';
import { asCanonical, validateCoded } from './membership/validate-coded';

/**
 * $validate-code as the engine sees it, for a ValueSet and for a CodeSystem: no HTTP, no
 * storage. Answers a ValidationResult, or throws TerminologyError for a request that cannot be
 * answered (the operation decides how that looks on the wire).
 */

export interface CodedValue {
  concept: CodeableConcept;
  mode: CodedMode;
  issuePath: string;
}

export interface CodedInputs {
  code?: string;
  system?: string;
  version?: string;
  display?: string;
  coding?: Coding;
  codeableConcept?: CodeableConcept;
}

/** The value to validate, in the order the operation defines: codeableConcept, coding, code. */
export function codedValue(input: CodedInputs, params: TxParams): CodedValue | undefined {
  // A CodeableConcept is an input form only with a coding: text alone gives nothing to validate.
  if (input.codeableConcept?.coding?.length) {
    params.inferSystem = false;
    return { concept: input.codeableConcept, mode: 'codeableConcept', issuePath: 'CodeableConcept' };
  }
  if (input.coding) {
    params.inferSystem = false;
    return { concept: { coding: [input.coding] }, mode: 'coding', issuePath: 'Coding' };
  }
  if (input.code !== undefined) {
    if (!input.system && !params.inferSystem) return undefined;
    const coding: Coding = { code: input.code };
    if (input.system) coding.system = input.system;
    if (input.version) coding.version = input.version;
    if (input.display) coding.display = input.display;
    return { concept: { coding: [coding] }, mode: 'code', issuePath: '' };
  }
  return undefined;
}

export interface EngineContext {
  resolver: Resolver;
  params: TxParams;
  checkBudget(): void;
}

const VS_SUPPLEMENT = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';

/**
 * What work on a value set ($validate-code, $expand) runs in: the value set's own expansion
 * parameters applied as defaults, and the supplements the request and the value set require.
 */
export function valueSetEnv(valueSet: ValueSet, ctx: EngineContext): ValidationEnv {
  ctx.params.applyValueSetDefaults(valueSet.compose, valueSet.language);
  const env = makeEnv(ctx);
  for (const ext of valueSet.extension ?? []) {
    if (ext.url === VS_SUPPLEMENT)
      env.requiredSupplements.add(ext.valueCanonical ?? ext.valueUri ?? ext.valueString ?? '');
  }
  return env;
}

export function validateInValueSet(valueSet: ValueSet, coded: CodedValue, ctx: EngineContext): ValidationResult {
  const env = valueSetEnv(valueSet, ctx);
  const checker = new ValueSetChecker(env, valueSet);
  try {
    checker.prepare();
    requireSupplements(env);
  } catch (err) {
    if (err instanceof TerminologyError && err.status === undefined) return prepareFailure(err, coded, ctx);
    throw err;
  }
  return validateCoded({ checker, concept: coded.concept, mode: coded.mode, issuePath: coded.issuePath });
}

/**
 * CodeSystem/$validate-code: validation against the implicit value set of the whole code system
 * (at a version when one is stated). The system need not be known: that is a result, not an error.
 */
export function validateInCodeSystem(
  system: string,
  version: string | undefined,
  coded: CodedValue,
  ctx: EngineContext,
): ValidationResult {
  const env = makeEnv(ctx);
  const cs = ctx.resolver.codeSystem(system, version);
  const supplement = cs ? undefined : ctx.resolver.anyCodeSystem(system, version);
  if (supplement?.content === 'supplement') return supplementAsSystem(supplement, coded);
  const valueSet: ValueSet = {
    resourceType: 'ValueSet',
    status: 'active',
    url: cs?.valueSet ?? `${system}/vs`,
    compose: { include: [version ? { system, version } : { system }] },
  };
  const checker = new ValueSetChecker(env, valueSet);
  if (cs) requireSupplements(env, cs);
  return validateCoded({
    checker,
    concept: coded.concept,
    mode: coded.mode,
    issuePath: coded.issuePath,
    internal: true,
  });
}

/** CodeSystem/$validate-code with neither a url nor a system in the coding: no code system to ask. */
export function codingWithoutSystem(coded: CodedValue): ValidationResult {
  const issue = txIssue('Coding_has_no_system__cannot_validate', [], { path: coded.issuePath || 'code' });
  const result: ValidationResult = { result: false, message: issue.text, issues: outcomeOf([issue]) };
  const code = coded.concept.coding?.[0]?.code;
  if (coded.mode === 'codeableConcept') result.codeableConcept = coded.concept;
  else if (code) result.code = code;
  return result;
}

/** A supplement named as the system: the code cannot be valid, and the answer says why. */
function supplementAsSystem(supplement: CodeSystem, coded: CodedValue): ValidationResult {
  const canonical = supplement.version ? `${supplement.url}|${supplement.version}` : (supplement.url ?? '');
  const path = coded.mode === 'codeableConcept' ? `${coded.issuePath}.coding[0]` : coded.issuePath;
  const issue = txIssue('CODESYSTEM_CS_NO_SUPPLEMENT', [canonical], { path: addToPath(path, 'system') });
  const coding = coded.concept.coding?.[0];
  const result: ValidationResult = { result: false, message: issue.text, issues: outcomeOf([issue]) };
  if (coded.mode === 'codeableConcept') result.codeableConcept = coded.concept;
  else {
    if (coding?.code) result.code = coding.code;
    if (coding?.system) result.system = coding.system;
  }
  return result;
}

function makeEnv(ctx: EngineContext): ValidationEnv {
  return {
    resolver: ctx.resolver,
    params: ctx.params,
    requiredSupplements: new Set(ctx.params.supplements),
    usedSupplements: new Set(),
    checkBudget: ctx.checkBudget,
    pacer: new Pacer(ctx.checkBudget),
  };
}

/** Every supplement the request or value set names must exist and apply to a code system in use. */
export function requireSupplements(env: ValidationEnv, cs?: CodeSystem): void {
  if (cs)
    for (const s of env.resolver.supplementsFor(cs, env.requiredSupplements))
      env.usedSupplements.add(s.version ? `${s.url}|${s.version}` : (s.url ?? ''));
  const missing = [...env.requiredSupplements].filter(
    (s) => !env.usedSupplements.has(s) && ![...env.usedSupplements].some((u) => u.split('|')[0] === s),
  );
  if (missing.length > 0) {
    throw new TerminologyError(txIssue('VALUESET_SUPPLEMENT_MISSING', [missing.join(',')]), 422);
  }
}

/** A value set that cannot be prepared (an import that is missing) makes the code invalid, not the request. */
function prepareFailure(err: TerminologyError, coded: CodedValue, ctx: EngineContext): ValidationResult {
  const result: ValidationResult = {
    result: false,
    message: err.issue.text,
    issues: outcomeOf([err.issue]),
  };
  if (err.unknownSystem) result['x-caused-by-unknown-system'] = [asCanonical(err.unknownSystem)];
  if (coded.mode === 'codeableConcept') {
    result.codeableConcept = coded.concept;
    return result;
  }
  const coding = coded.concept.coding?.[0];
  if (coding?.system) result.system = coding.system;
  if (coding?.version) result.version = coding.version;
  else if (coding?.system) result.version = ctx.resolver.codeSystem(coding.system)?.version;
  if (coding?.code) result.code = coding.code;
  return result;
}
