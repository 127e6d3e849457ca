import { describe, expect, test } from 'vitest';
import { checkDatatype } from '../../src/fhir/datatype-check';

const at = 'Parameters.parameter[0].value';

describe('checking a value against its R4 data type', () => {
  test.each([
    [
      'Coding',
      { system: 'http://hl7.org/fhir/administrative-gender', code: 'female', display: 'Female', userSelected: true },
    ],
    ['CodeableConcept', { coding: [{ system: 'http://x', code: 'a' }, { code: 'b' }], text: 'A or B' }],
    ['Quantity', { value: 12.5, comparator: '<', unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' }],
    [
      'Reference',
      { reference: 'Patient/1', type: 'Patient', identifier: { system: 'urn:oid:1.2.3', value: 'x' }, display: 'Pat' },
    ],
    [
      'Identifier',
      { use: 'official', type: { text: 'MRN' }, system: 'http://x', value: '123', period: { start: '2020-01-01' } },
    ],
    [
      'Timing',
      {
        repeat: {
          boundsPeriod: { start: '2020-01-01' },
          frequency: 2,
          period: 1,
          periodUnit: 'd',
          dayOfWeek: ['mon', 'tue'],
        },
      },
    ],
    ['HumanName', { given: ['A', null], _given: [null, { extension: [{ url: 'http://x', valueString: 'y' }] }] }],
    [
      'Coding',
      {
        _code: {
          extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }],
        },
      },
    ],
  ])('a valid %s passes', (type, value) => {
    expect(checkDatatype(type, value, `${at}${type}`)).toBeUndefined();
  });

  test.each([
    ['Coding', { system: 'http://x', code: 'female ' }, 'Coding.code', '"female " is not a valid code'],
    ['Coding', { system: 'http://x y', code: 'a' }, 'Coding.system', '"http://x y" is not a valid uri'],
    ['Coding', { code: 7 }, 'Coding.code', '7 is not a valid code'],
    ['Coding', { code: null }, 'Coding.code', 'null is not a valid code'],
    ['Coding', { code: '' }, 'Coding.code', '"" is not a valid code'],
    ['Coding', { code: ['a'] }, 'Coding.code', 'does not repeat: give one value, not a list'],
    ['Coding', { code: 'a', colour: 'red' }, 'Coding.colour', 'is not an element of this type'],
    ['Coding', {}, 'Coding', 'is empty; an element has a value or children'],
    ['Coding', 'female', 'Coding', '"female" is not a Coding (an object)'],
    ['CodeableConcept', { coding: { code: 'a' } }, 'CodeableConcept.coding', 'repeats: give a list'],
    ['CodeableConcept', { coding: [] }, 'CodeableConcept.coding', 'is an empty list'],
    ['CodeableConcept', { coding: [null] }, 'CodeableConcept.coding[0]', 'null is not a Coding (an object)'],
    [
      'CodeableConcept',
      { coding: [{ code: 'a' }, { system: 3 }] },
      'CodeableConcept.coding[1].system',
      '3 is not a valid uri',
    ],
    ['Quantity', { value: '12' }, 'Quantity.value', '"12" is not a valid decimal'],
    [
      'Reference',
      { identifier: { value: 'x', period: { start: '2020-13-01' } } },
      'Reference.identifier.period.start',
      '"2020-13-01" is not a valid dateTime',
    ],
    ['Identifier', { value: 'a\u0001b' }, 'Identifier.value', '"a\\u0001b" is not a valid string'],
    ['Coding', { code: 'a', extension: [{ valueString: 'no url' }] }, 'Coding.extension[0].url', 'is required'],
    [
      'Coding',
      { code: 'a', extension: [{ url: 'http://x', valueFoo: 1 }] },
      'Coding.extension[0].valueFoo',
      'is not an element of this type',
    ],
    ['ContactPoint', { rank: 0 }, 'ContactPoint.rank', '0 is not a valid positiveInt'],
  ])('%s %j: %s %s', (type, value, where, reason) => {
    const path = `${at}${type}`;
    expect(checkDatatype(type, value, path)).toEqual({ path: `${at}${where}`, reason });
  });
});
