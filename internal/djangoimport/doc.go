// Package djangoimport reads a Django dumpdata file into authsvc's users
// (Read): their Django hashes, profiles and flags, their DRF keys
// (Token) and their django-otp devices (Factors), with every record it
// leaves out and why (Skip). The devices come out in clear, to be sealed
// under the import's secret key (Dump.SealFactors), or to bring a user's
// factors up to date (Factors.UpdateFactors).
package djangoimport
