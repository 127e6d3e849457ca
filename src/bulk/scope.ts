import type { Resource } from 'fhir/r4';
import type { BulkExportDeps, ExportJobInput } from './export';

/**
 * Which resources a Patient or Group level export takes: those in the compartments of its patients
 * (all patients when none are named), then the supporting resources (Practitioner, Medication ...)
 * that the taken ones refer to. A system level export takes everything. Compartment types are
 * exported first, so the supporting types know what was referred to when their turn comes.
 */
export class ExportScope {
  private readonly patients: Set<string> | undefined;
  /** Per supporting type, the ids the exported compartments refer to. */
  private readonly referenced: Map<string, Set<string>>;

  constructor(
    private readonly input: ExportJobInput,
    private readonly compartmentTypes: readonly string[],
    private readonly deps: Pick<BulkExportDeps, 'compartmentParams' | 'referencesOf'>,
  ) {
    this.patients = input.patients ? new Set(input.patients) : undefined;
    this.referenced = new Map(
      input.types.filter((type) => this.isSupporting(type)).map((type) => [type, new Set<string>()]),
    );
  }

  isSupporting(type: string): boolean {
    return this.input.level !== 'system' && !this.compartmentTypes.includes(type);
  }

  /** The types in the order they are exported: compartment types, then supporting ones. */
  order(): string[] {
    const types = this.input.types;
    return [...types.filter((type) => !this.isSupporting(type)), ...types.filter((type) => this.isSupporting(type))];
  }

  /** A supporting type nothing exported refers to: its file would be empty. */
  nothingReferenced(type: string): boolean {
    return this.referenced.get(type)?.size === 0;
  }

  /** Whether the resource is exported; a compartment resource that is notes what it refers to. */
  inScope(resource: Resource): boolean {
    if (this.input.level === 'system') return true;
    if (this.isSupporting(resource.resourceType))
      return this.referenced.get(resource.resourceType)?.has(resource.id as string) === true;
    const references = this.deps.referencesOf(resource);
    const patients = this.patients;
    let taken: boolean;
    if (resource.resourceType === 'Patient') {
      taken = patients ? patients.has(resource.id as string) : true;
    } else {
      const params = this.deps.compartmentParams[resource.resourceType] ?? [];
      const of = references.filter((r) => r.type === 'Patient' && params.includes(r.param)).map((r) => r.id);
      taken = patients ? of.some((p) => patients.has(p)) : of.length > 0;
    }
    if (taken) for (const target of references) this.referenced.get(target.type)?.add(target.id);
    return taken;
  }
}
