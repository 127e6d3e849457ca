import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFINITIONS_DIR } from '../../project';
import type { ElementInfo, R4Model } from './generate';

export type { ElementInfo, R4Model };

/**
 * The R4 element model search navigates by (generated from the pinned StructureDefinitions; see
 * generate.ts): what type each element has, which repeat, which are choices, which are in the
 * summary view. Read once, on first use.
 */
export class ElementModel {
  constructor(private readonly model: R4Model) {}

  static load(): ElementModel {
    return new ElementModel(JSON.parse(readFileSync(join(DEFINITIONS_DIR, 'model', 'r4-model.json'), 'utf8')) as R4Model);
  }

  /** The element `path` (below the type) of a resource or complex data type. */
  element(root: string, path: string): ElementInfo | undefined {
    return this.model.elements[root]?.[path];
  }

  isComplexType(type: string): boolean {
    return type in this.model.elements;
  }

  /** Top-level element names of a type, with their info (for _summary and _elements). */
  topLevel(type: string): [string, ElementInfo][] {
    return Object.entries(this.model.elements[type] ?? {}).filter(([path]) => !path.includes('.'));
  }

  /** Every element path of a type, with its info. */
  paths(type: string): [string, ElementInfo][] {
    return Object.entries(this.model.elements[type] ?? {});
  }

  /** compartment type -> resource type -> the parameters that put a resource in the compartment. */
  compartment(type: string): Record<string, string[]> | undefined {
    return this.model.compartments[type];
  }
}

let shared: ElementModel | undefined;

/** The one model of the process (it never changes). */
export function r4Model(): ElementModel {
  shared ??= ElementModel.load();
  return shared;
}
