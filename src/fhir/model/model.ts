import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFINITIONS_DIR } from '../../project';
import type { ElementInfo, R4Model } from './generate';

export type { ElementInfo, R4Model };

/**
 * The R4 element model search, GraphQL and patch navigate by (generated from the pinned
 * StructureDefinitions; see generate.ts): what type each element has, which repeat, which are
 * choices, which are in the summary view. Read once, on first use.
 */
export class ElementModel {
  constructor(private readonly model: R4Model) {}

  static load(): ElementModel {
    return new ElementModel(
      JSON.parse(readFileSync(join(DEFINITIONS_DIR, 'model', 'r4-model.json'), 'utf8')) as R4Model,
    );
  }

  /** The element `path` (below the type) of a resource or complex data type. */
  element(root: string, path: string): ElementInfo | undefined {
    // Own members only: a path a client wrote (`Patient.constructor` in a patch) is no element.
    const elements = this.elementsOf(root);
    return elements && Object.hasOwn(elements, path) ? elements[path] : undefined;
  }

  isComplexType(type: string): boolean {
    return this.elementsOf(type) !== undefined;
  }

  private elementsOf(type: string): Record<string, ElementInfo> | undefined {
    return Object.hasOwn(this.model.elements, type) ? this.model.elements[type] : undefined;
  }

  /** Top-level element names of a type, with their info (for _summary and _elements). */
  topLevel(type: string): [string, ElementInfo][] {
    return Object.entries(this.elementsOf(type) ?? {}).filter(([path]) => !path.includes('.'));
  }

  /** Every element path of a type, with its info. */
  paths(type: string): [string, ElementInfo][] {
    return Object.entries(this.elementsOf(type) ?? {});
  }

  /** compartment type -> resource type -> the parameters that put a resource in the compartment. */
  compartment(type: string): Record<string, string[]> | undefined {
    return Object.hasOwn(this.model.compartments, type) ? this.model.compartments[type] : undefined;
  }
}

let shared: ElementModel | undefined;

/** The one model of the process (it never changes). */
export function r4Model(): ElementModel {
  shared ??= ElementModel.load();
  return shared;
}
