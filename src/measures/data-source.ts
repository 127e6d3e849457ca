import type { Patient, Resource } from 'fhir/r4';
import { FHIRWrapper } from 'cql-exec-fhir';
import type { PatientObject, RecordObject, RetrieveDetails } from 'cql-execution';
import type { RequestContext } from '../context/request-context';
import { r4Model } from '../fhir/model/model';
import type { SearchService } from '../search/search-service';
import { searchAll } from './search-pages';

/**
 * Patient data for cql-execution, read through the search service (so the request's project and
 * its principal's grants apply): a retrieve of a type is a search of that type in the patient's
 * compartment, read once per patient and type and kept for the patient's other retrieves. The
 * engine applies a retrieve's code and date filters itself on what comes back.
 */

const COMPARTMENT = r4Model().compartment('Patient') ?? {};

let wrapper: FHIRWrapper | undefined;
/** The R4 model info, parsed once per process (it is large). */
export function fhirWrapper(): FHIRWrapper {
  wrapper ??= FHIRWrapper.FHIRv401();
  return wrapper;
}

interface PatientData {
  /** The patient as cql-execution sees it: its elements, and its records by type. */
  patient: PatientObject;
  /** Every resource read for the patient, by `Type/id`. */
  resources: Map<string, Resource>;
}

/** `{http://hl7.org/fhir}Encounter` or `FHIR.Encounter` -> `Encounter`. */
function resourceTypeOf(datatype: string): string {
  return datatype.replace(/^\{[^}]*\}/, '').replace(/^FHIR\./, '');
}

export class CompartmentData {
  constructor(
    private readonly search: SearchService,
    private readonly ctx: RequestContext,
  ) {}

  /** The patient's data source: its resources are searched for when a retrieve first asks for their type. */
  patient(resource: Patient): PatientData {
    const id = resource.id as string;
    const resources = new Map<string, Resource>([[`Patient/${id}`, resource]]);
    const byType = new Map<string, Promise<Resource[]>>();
    const wrap = fhirWrapper();
    const read = (type: string): Promise<Resource[]> => {
      let found = byType.get(type);
      if (!found) {
        found = type === 'Patient' ? Promise.resolve([resource]) : this.compartment(id, type);
        byType.set(type, found);
      }
      return found;
    };
    const patient = wrap.wrap(resource) as unknown as PatientObject;
    // Wrapping is costly (a getter per element): each resource once, and only those a retrieve's codes may match.
    const wrapped = new Map<Resource, RecordObject>();
    const findRecords = async (profile: string | null, details?: RetrieveDetails): Promise<RecordObject[]> => {
      const type = resourceTypeOf(details?.datatype ?? profile ?? '');
      if (!this.search.hasParam(type, '_id')) return [];
      const found = await read(type);
      const test = details?.codes && details.codeProperty ? codeTest(details.codes) : undefined;
      const out: RecordObject[] = [];
      for (const r of found) {
        if (test && !mayMatch(r, details?.codeProperty as string, test)) continue;
        resources.set(`${r.resourceType}/${r.id}`, r);
        let record = wrapped.get(r);
        if (!record) wrapped.set(r, (record = wrap.wrap(r) as unknown as RecordObject));
        out.push(record);
      }
      return out;
    };
    Object.defineProperty(patient, 'findRecords', { value: findRecords, enumerable: false });
    return { patient, resources };
  }

  /**
   * Every resource of `type` in the patient's compartment, all pages; a type outside the
   * compartment (Medication, Location, ...) is not the patient's data and is read whole.
   */
  private async compartment(id: string, type: string): Promise<Resource[]> {
    if (COMPARTMENT[type] === undefined) return searchAll(this.search, { level: 'type', type }, {}, this.ctx);
    return searchAll(this.search, { level: 'compartment', compartment: 'Patient', id, type }, {}, this.ctx);
  }
}

/** Whether a coding may be among a retrieve's codes (a lookup in the value set's index, or in the listed codes). */
type CodeTest = (system: string | undefined, code: string) => boolean;

function codeTest(codes: NonNullable<RetrieveDetails['codes']>): CodeTest {
  const indexed = codes as { mayContain?: CodeTest };
  if (typeof indexed.mayContain === 'function') return (system, code) => (indexed.mayContain as CodeTest)(system, code);
  const list = (
    Array.isArray(codes) ? codes : ((codes as { codes?: { system?: string; code: string }[] }).codes ?? [])
  ) as { system?: string; code: string }[];
  const keys = new Set(list.map((c) => `${c.system}|${c.code}`));
  return (system, code) => keys.has(`${system}|${code}`);
}

/**
 * Whether a record may pass a retrieve's code filter, judged on its JSON before it is wrapped: a
 * record is left out only when the coded element is there as codings and none is among the
 * codes, or is absent (the engine would drop it too). Anything else (a bare code, a reference in
 * a choice, a path) is kept for the engine to decide.
 */
function mayMatch(resource: Resource, property: string, test: CodeTest): boolean {
  if (property.includes('.')) return true;
  const json = resource as unknown as Record<string, unknown>;
  let value = json[property];
  if (value === undefined) {
    const choice = Object.keys(json).find((k) => k.startsWith(property) && /^[A-Z]/.test(k.slice(property.length)));
    if (choice === undefined) return false;
    if (!choice.endsWith('CodeableConcept') && !choice.endsWith('Coding')) return true;
    value = json[choice];
  }
  const codings: { system?: string; code?: string }[] = [];
  for (const item of Array.isArray(value) ? value : [value]) {
    if (typeof item !== 'object' || item === null) return true;
    const o = item as { coding?: unknown; code?: unknown; system?: unknown };
    if (Array.isArray(o.coding)) codings.push(...(o.coding as { system?: string; code?: string }[]));
    else if (typeof o.code === 'string') codings.push(o as { system?: string; code: string });
    else return true;
  }
  return codings.some((c) => typeof c.code === 'string' && test(c.system, c.code));
}
