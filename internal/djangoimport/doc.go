// Package djangoimport is what authsvc's user import brings in, and how:
// it reads a Django dumpdata file into authsvc's users (Read), with their
// DRF keys (Token), their django-otp devices (Factors) and every record
// it leaves out and why (Skip); or takes an authsvc users file's users as
// they are (FromUsers). Then it plans the import against the users a
// directory holds (NewPlan): the users to add, those to bring up to date,
// those left alone, and which users the keys go to (Plan.Owners). The
// command applies the plan, or simulates it for a dry run
// (Plan.Simulate); it writes nothing itself.
package djangoimport
